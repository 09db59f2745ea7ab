public import Baton
import Dispatch
public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A job that runs one `URLSession` data or download task.
///
/// ```swift
/// let fetch = URLSessionTaskJob(request: URLRequest(url: feedURL), timeout: .seconds(30))
/// queue.add(fetch)
/// try await fetch.outcome.get()
/// let body = fetch.data!          // the response body; fetch.response has the status and headers
/// ```
///
/// - The job finishes from the task's completion handler — never by observing the task's state — so
///   it works the same on Linux (which has no KVO) and on Apple platforms.
/// - Cancelling the job cancels the task; the job then finishes as cancelled.
/// - A status code outside ``acceptableStatusCodes`` fails the job with a ``NetworkError`` of code
///   ``NetworkError/Code/httpStatus`` ("HTTP 503 (service unavailable) from http://…"); transport
///   failures give ``NetworkError/Code/transport``.
/// - With a ``timeout``, the job cancels the task when the deadline passes and fails with
///   ``NetworkError/Code/timedOut``. The deadline is measured from the moment the task starts.
/// - For a ``Kind/download(directory:)`` task, the body is moved, inside the completion handler, to
///   a new file in the given folder (``downloadedFile``), which then belongs to the caller. On failure
///   or cancellation no file is left behind. ``HTTPDownloadJob`` builds on this to write a named file
///   atomically.
///
/// ## Thread safety
/// Every property and method may be called from any thread. The job's own state is guarded by a lock;
/// the progress handler and the task's completion handler are never called while it is held.
public class URLSessionTaskJob: CallbackJob, @unchecked Sendable {
    // @unchecked Sendable: the `let` properties are immutable; every `var` below is guarded by `lock`.

    /// What kind of task to run.
    ///
    /// ## Thread safety
    /// A `Sendable` value.
    public enum Kind: Sendable {
        /// A data task: the body is kept in memory (``URLSessionTaskJob/data``).
        case data
        /// A download task: the body is written to a file, then moved to a new file in `directory`
        /// (``URLSessionTaskJob/downloadedFile``).
        case download(directory: URL)
    }

    /// Called with the number of bytes received so far and the expected total (when the server sent a
    /// `Content-Length`). Called from a background thread, about ten times a second while the task
    /// runs, and once more with the final count on success.
    public typealias ProgressHandler = @Sendable (_ received: Int64, _ expected: Int64?) -> Void

    /// The request the task sends.
    public let request: URLRequest
    /// The session that runs the task.
    public let session: URLSession
    /// Data or download.
    public let kind: Kind
    /// Status codes that count as success; `nil` accepts every response. Defaults to `200..<300`.
    public let acceptableStatusCodes: Range<Int>?
    /// How long the task may take, from its start to its completion; `nil` for no limit.
    public let timeout: Duration?

    private let lock = Lock()
    // MARK: Guarded by `lock`
    private var storedTask: URLSessionTask?
    private var storedResponse: URLResponse?
    private var storedData: Data?
    private var storedFile: URL?
    private var progressHandler: ProgressHandler?
    private var progressTimer: (any DispatchSourceTimer)?
    private var deadlinePassed = false
    private var completed = false

    /// Creates a job for `request`.
    ///
    /// - Parameters:
    ///   - name: For diagnostics; defaults to the type name and the job's id.
    ///   - request: The request to send.
    ///   - kind: ``Kind/data`` (default) or ``Kind/download(directory:)``.
    ///   - session: The session that runs the task; `.shared` by default.
    ///   - acceptableStatusCodes: Status codes that count as success; `nil` accepts every response.
    ///   - timeout: A deadline for the whole transfer; `nil` for none (the session's own timeouts apply).
    ///   - progress: Told how many bytes arrived; see ``ProgressHandler``.
    public init(
        name: String? = nil,
        request: URLRequest,
        kind: Kind = .data,
        session: URLSession = .shared,
        acceptableStatusCodes: Range<Int>? = 200..<300,
        timeout: Duration? = nil,
        progress: ProgressHandler? = nil
    ) {
        self.request = request
        self.kind = kind
        self.session = session
        self.acceptableStatusCodes = acceptableStatusCodes
        self.timeout = timeout
        self.progressHandler = progress
        super.init(name: name)
    }

    // MARK: Results

    /// The task, once the job started.
    public var task: URLSessionTask? { lock.withLock { storedTask } }

    /// The server's response, once the task completed with one (also when the status was not accepted).
    public var response: URLResponse? { lock.withLock { storedResponse } }

    /// The status code of the response, if it was an HTTP response.
    public var statusCode: Int? { (response as? HTTPURLResponse)?.statusCode }

    /// The response body of a successful ``Kind/data`` task.
    public var data: Data? { lock.withLock { storedData } }

    /// The file that holds the body of a successful ``Kind/download(directory:)`` task. The caller
    /// owns it and should move or delete it.
    public var downloadedFile: URL? { lock.withLock { storedFile } }

    // MARK: Running

    public override func execute() {
        let task: URLSessionTask
        switch kind {
        case .data:
            task = session.dataTask(with: request) { data, response, error in
                self.taskCompleted(data: data, file: nil, response: response, error: error)
            }
        case .download(let directory):
            task = session.downloadTask(with: request) { location, response, error in
                // The file at `location` is deleted when this handler returns: act on it now.
                self.taskCompleted(data: nil, file: location.map { ($0, directory) }, response: response, error: error)
            }
        }
        let timer = makeProgressTimer(for: task)
        lock.withLock {
            storedTask = task
            progressTimer = timer
        }
        if let timeout {
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout.seconds) { [weak self] in
                self?.deadlineDidPass()
            }
        }
        timer?.resume()
        task.resume()
        // A cancel that arrived before `storedTask` was set could not reach the task.
        if isCancelled { task.cancel() }
    }

    public override func didCancel(reason: any Error) {
        task?.cancel()
    }

    private func deadlineDidPass() {
        let fire = lock.withLock {
            guard !completed else { return false }
            deadlinePassed = true
            return true
        }
        guard fire, let timeout else { return }
        cancel(reason: NetworkError.timedOut(url: request.url, after: timeout.seconds))
    }

    private func makeProgressTimer(for task: URLSessionTask) -> (any DispatchSourceTimer)? {
        guard let handler = lock.withLock({ progressHandler }) else { return nil }
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now() + .milliseconds(100), repeating: .milliseconds(100))
        timer.setEventHandler { [weak task] in
            guard let task else { return }
            let expected = task.countOfBytesExpectedToReceive
            handler(task.countOfBytesReceived, expected > 0 ? expected : nil)
        }
        return timer
    }

    /// The completion handler of the task: decides the outcome and finishes the job.
    private func taskCompleted(
        data: Data?, file: (location: URL, directory: URL)?, response: URLResponse?, error: (any Error)?
    ) {
        let (timer, timedOut, handler) = lock.withLock {
            completed = true
            storedResponse = response
            // Drop the handler so nothing it captured outlives the job.
            defer { (progressTimer, progressHandler) = (nil, nil) }
            return (progressTimer, deadlinePassed, progressHandler)
        }
        timer?.cancel()

        var failure: (any Error)?
        if let error {
            if let urlError = error as? URLError, urlError.code == .cancelled {
                failure =
                    timedOut
                    ? NetworkError.timedOut(url: request.url, after: timeout?.seconds ?? 0) : CancellationError()
            } else {
                failure = NetworkError.transport(url: request.url, error: error)
            }
        } else if let status = (response as? HTTPURLResponse)?.statusCode, let accepted = acceptableStatusCodes,
            !accepted.contains(status)
        {
            failure = NetworkError.httpStatus(status, url: (response?.url ?? request.url))
        } else if isCancelled {
            failure = CancellationError()
        }

        var kept: URL?
        if failure == nil, let file {
            do {
                kept = try keepDownload(at: file.location, in: file.directory)
            } catch {
                failure = error
            }
        }
        if let location = file?.location, kept == nil {
            try? FileManager.default.removeItem(at: location)
        }

        if failure == nil {
            let received = Int64(data?.count ?? 0)
            let size = kept.flatMap { try? FileManager.default.attributesOfItem(atPath: $0.path)[.size] as? NSNumber }
            let total = size.map { $0.int64Value } ?? received
            lock.withLock {
                storedData = data
                storedFile = kept
            }
            handler?(total, total)
        }
        finish(failure)
    }

    /// Moves the downloaded file at `location` (deleted by `URLSession` when the completion handler
    /// returns) to where it is kept, and returns that place. Runs inside the completion handler,
    /// only for a successful response.
    ///
    /// The default moves it to a new file in `directory`. ``HTTPDownloadJob`` overrides it to write
    /// its destination atomically. Throw to fail the job; the file at `location` is then removed.
    func keepDownload(at location: URL, in directory: URL) throws -> URL {
        let target = directory.appendingPathComponent("download-\(UUID().uuidString)")
        do {
            try FileManager.default.moveItem(at: location, to: target)
        } catch {
            try? FileManager.default.removeItem(at: target)
            throw NetworkError.file(url: request.url, path: target.path, error: error)
        }
        return target
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
