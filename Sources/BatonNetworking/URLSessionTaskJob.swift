public import Baton
import Dispatch
public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A job that runs one HTTP request with `URLSession` and keeps the body in memory or writes it to a file.
///
/// ```swift
/// let fetch = URLSessionTaskJob(request: URLRequest(url: feedURL), idleTimeout: .seconds(30))
/// queue.add(fetch)
/// try await fetch.outcome.get()
/// let body = fetch.data!          // the response body; fetch.response has the status and headers
/// ```
///
/// - The body is received through a session delegate, chunk by chunk, on every platform (Linux
///   included): the progress handler sees the bytes advance while they arrive, and the idle timeout
///   knows when the last byte came. The job runs its task in a session of its own, made with the
///   configuration of ``session`` (its proxies, headers and protocol classes), and invalidates it when
///   the task completes.
/// - Cancelling the job cancels the task; the job then finishes as cancelled.
/// - A status code outside ``acceptableStatusCodes`` fails the job with a ``NetworkError`` of code
///   ``NetworkError/Code/httpStatus`` ("HTTP 503 (service unavailable) from http://…"); transport
///   failures give ``NetworkError/Code/transport``.
/// - ``idleTimeout``: the job fails with ``NetworkError/Code/timedOut`` ("no data from … within 30
///   seconds") when no byte arrived for that long — a slow but steady transfer is never cut.
///   ``timeout`` is a separate limit on the whole transfer, from its start; both are optional. Both are
///   measured on ``clock`` (the continuous clock unless you pass another, such as `BatonTesting`'s
///   `ManualClock` in a test that moves time by hand).
/// - For a ``Kind/download(directory:)`` task, the body is written, as it arrives, to a hidden file
///   (named with ``temporaryFilePrefix``) in the given folder, and handed over as ``downloadedFile``
///   when the transfer succeeded. On failure, timeout or cancellation that file is removed: no
///   partial or temporary file is ever left behind, in that folder or anywhere else.
///   ``HTTPDownloadJob`` builds on this to write a named file atomically.
///
/// ## Thread safety
/// Every property and method may be called from any thread. The job's own state is guarded by a lock;
/// the progress handler is never called while it is held.
public class URLSessionTaskJob: CallbackJob, @unchecked Sendable {
    // @unchecked Sendable: the `let` properties are immutable; every `var` below is guarded by `lock`.

    /// What to do with the body.
    ///
    /// ## Thread safety
    /// A `Sendable` value.
    public enum Kind: Sendable {
        /// Keep the body in memory (``URLSessionTaskJob/data``).
        case data
        /// Write the body to a new file in `directory` (``URLSessionTaskJob/downloadedFile``).
        case download(directory: URL)
    }

    /// Called with the number of bytes received so far and the expected total (when the server sent a
    /// `Content-Length`). Called from a background thread as bytes arrive (at most about ten times a
    /// second), one call at a time, and once more with the final count on success: that call is the
    /// last, made before the job finishes.
    public typealias ProgressHandler = @Sendable (_ received: Int64, _ expected: Int64?) -> Void

    /// The prefix of the file a download is written to while it arrives.
    public static let temporaryFilePrefix = ".baton-download-"

    /// The request the task sends.
    public let request: URLRequest
    /// The session whose configuration the task uses.
    public let session: URLSession
    /// Data or download.
    public let kind: Kind
    /// Status codes that count as success; `nil` accepts every response. Defaults to `200..<300`.
    public let acceptableStatusCodes: Range<Int>?
    /// The longest the whole transfer may take, from its start; `nil` for no limit.
    public let timeout: Duration?
    /// The longest the transfer may go without receiving a byte; `nil` for no limit.
    public let idleTimeout: Duration?
    /// The largest body accepted, in bytes; `nil` for no limit.
    public let maximumBytes: Int64?
    /// The clock ``timeout`` and ``idleTimeout`` are measured on.
    public let clock: any Clock<Duration>

    private let lock = Lock()
    // MARK: Guarded by `lock`
    private var storedTask: URLSessionTask?
    private var storedResponse: URLResponse?
    private var storedData: Data?
    private var storedFile: URL?
    private var progressHandler: ProgressHandler?
    private var watchdog: (any DispatchSourceTimer)?
    /// Measures time on ``clock`` from the start of the transfer; set when the job starts.
    private var stopwatch: Stopwatch?
    private var timedOutError: NetworkError?
    private var writeError: (any Error)?
    /// Set when the body went past ``maximumBytes`` (the task was cancelled).
    private var limitError: NetworkError?
    /// The request timeout of the job's own session (see `execute()`), for messages.
    private var requestTimeout = 60.0
    private var completed = false
    private var received: Int64 = 0
    private var expected: Int64?
    /// When the last byte (or the response) arrived, on ``stopwatch``.
    private var lastActivity: Duration = .zero
    private var lastReport = DispatchTime(uptimeNanoseconds: 0)
    private var reportScheduled = false
    /// The session's delegate queue (serial): every progress report is made on it, so none can come
    /// after the final one, which the task's completion makes there before it finishes the job.
    private var delegateQueue: OperationQueue?
    // MARK: Used only by the delegate callbacks, which run one at a time on the session's serial queue
    private var body = Data()
    private var partialFile: (url: URL, handle: FileHandle)?

    /// Creates a job for `request`.
    ///
    /// - Parameters:
    ///   - name: For diagnostics; defaults to the type name and the job's id.
    ///   - request: The request to send.
    ///   - kind: ``Kind/data`` (default) or ``Kind/download(directory:)``.
    ///   - session: Its configuration is used for the task; `.shared` by default.
    ///   - acceptableStatusCodes: Status codes that count as success; `nil` accepts every response.
    ///   - timeout: A limit on the whole transfer; `nil` for none.
    ///   - idleTimeout: How long the transfer may go without a byte; `nil` for no limit.
    ///   - clock: The clock both limits are measured on; the continuous clock by default.
    ///   - maximumBytes: The largest body accepted; past it the transfer stops and the job fails with
    ///     `NetworkError.tooLarge` (a server that never ends its body cannot fill the disk or memory).
    ///     `nil` for no limit.
    ///   - progress: Told how many bytes arrived; see ``ProgressHandler``.
    public init(
        name: String? = nil,
        request: URLRequest,
        kind: Kind = .data,
        session: URLSession = .shared,
        acceptableStatusCodes: Range<Int>? = 200..<300,
        timeout: Duration? = nil,
        idleTimeout: Duration? = nil,
        clock: any Clock<Duration> = ContinuousClock(),
        maximumBytes: Int64? = nil,
        progress: ProgressHandler? = nil
    ) {
        self.request = request
        self.kind = kind
        self.session = session
        self.acceptableStatusCodes = acceptableStatusCodes
        self.timeout = timeout
        self.idleTimeout = idleTimeout
        self.clock = clock
        self.maximumBytes = maximumBytes
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
        let delegate = TaskDelegate(job: self)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let configuration = session.configuration
        // The session's own limits must not cut the job's: its request timeout (60 seconds by default) ends
        // a transfer that waits that long for a byte, so it is raised past a longer idleTimeout, and its
        // resource timeout past a longer timeout.
        // (Not past `timeout` alone: the request timeout is an idle limit, and a stall must still end
        // at it when the job sets no idleTimeout of its own.)
        let margin = 1.0
        if let idleTimeout, idleTimeout.seconds + margin > configuration.timeoutIntervalForRequest {
            configuration.timeoutIntervalForRequest = idleTimeout.seconds + margin
        }
        if let timeout, timeout.seconds + margin > configuration.timeoutIntervalForResource {
            configuration.timeoutIntervalForResource = timeout.seconds + margin
        }
        let ownSession = URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
        let task = ownSession.dataTask(with: request)
        // The session keeps its delegate until it is invalidated: let it go once the task completed.
        ownSession.finishTasksAndInvalidate()
        let stopwatch = clock.startStopwatch()
        let timer = makeWatchdog(stopwatch)
        lock.withLock {
            storedTask = task
            requestTimeout = configuration.timeoutIntervalForRequest
            self.stopwatch = stopwatch
            watchdog = timer
            delegateQueue = queue
        }
        timer?.resume()
        task.resume()
        // A cancel that arrived before `storedTask` was set could not reach the task.
        if isCancelled { task.cancel() }
    }

    public override func didCancel(reason: any Error) {
        task?.cancel()
    }

    /// A timer that enforces ``timeout`` and ``idleTimeout``; `nil` when there are none. It ticks on a
    /// Dispatch queue, not in a task: a timeout must fire even when every thread of Swift concurrency's
    /// pool is busy (which is when transfers stall). Each tick reads the time on ``clock``.
    private func makeWatchdog(_ stopwatch: Stopwatch) -> (any DispatchSourceTimer)? {
        guard timeout != nil || idleTimeout != nil else { return nil }
        let limits = [timeout, idleTimeout].compactMap { $0 }
        let period = max(0.01, min(0.25, (limits.min() ?? .seconds(1)).seconds / 8))
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now() + period, repeating: period)
        timer.setEventHandler { [weak self] in self?.checkLimits(now: stopwatch.elapsed()) }
        return timer
    }

    /// Fails the job when a limit was reached at `now` (time since the start, on ``clock``).
    private func checkLimits(now: Duration) {
        // A job cancelled by its owner stays cancelled, however long the task takes to stop.
        if isCancelled { return }
        let error: NetworkError? = lock.withLock {
            guard !completed, timedOutError == nil else { return nil }
            if let idleTimeout, now - lastActivity >= idleTimeout {
                timedOutError = .stalled(
                    url: request.url, after: idleTimeout.seconds, received: received, expected: expected)
            } else if let timeout, now >= timeout {
                timedOutError = .timedOut(url: request.url, after: timeout.seconds)
            }
            return timedOutError
        }
        if let error { cancel(reason: error) }
    }

    // MARK: Delegate callbacks (serial, on the session's delegate queue)

    fileprivate func didReceive(response: URLResponse) {
        let now = lock.withLock { stopwatch }?.elapsed()
        let stop: URLSessionTask? = lock.withLock {
            if let now { lastActivity = now }
            storedResponse = response
            let length = response.expectedContentLength
            expected = length > 0 ? length : nil
            // A size announced over the limit stops the transfer before its first byte (not for a reply
            // that carries no body whatever it announces: to a HEAD, a 204, a 304).
            let status = (response as? HTTPURLResponse)?.statusCode
            let bodiless = request.httpMethod == "HEAD" || status == 204 || status == 304
            guard let maximumBytes, length > maximumBytes, !bodiless, limitError == nil, !rejects(response)
            else { return nil }
            limitError = NetworkError.tooLarge(url: request.url, limit: maximumBytes, announced: length)
            return storedTask
        }
        stop?.cancel()
    }

    /// Whether `response` has a status code outside ``acceptableStatusCodes``: its body is not kept.
    private func rejects(_ response: URLResponse?) -> Bool {
        guard let status = (response as? HTTPURLResponse)?.statusCode, let accepted = acceptableStatusCodes else {
            return false
        }
        return !accepted.contains(status)
    }

    fileprivate func didReceive(_ chunk: Data, task: URLSessionTask) {
        var failure: (any Error)?
        // The body of a response whose status fails the job (an error page) is neither kept nor written.
        let rejected = rejects(lock.withLock { storedResponse } ?? task.response)
        switch kind {
        case _ where rejected:
            break
        case .data:
            body.append(chunk)
        case .download(let directory):
            do {
                if partialFile == nil { partialFile = try Self.createTemporaryFile(in: directory) }
                try partialFile?.handle.write(contentsOf: chunk)
            } catch {
                failure = error
            }
        }
        let arrived = lock.withLock { stopwatch }?.elapsed()
        let wallClock = DispatchTime.now()
        let (report, scheduleAt): ((ProgressHandler, Int64, Int64?)?, DispatchTime?) = lock.withLock {
            if let arrived { lastActivity = arrived }
            received += Int64(chunk.count)
            if let failure, writeError == nil { writeError = failure }
            if let maximumBytes, received > maximumBytes, limitError == nil {
                limitError = NetworkError.tooLarge(url: request.url, limit: maximumBytes, announced: nil)
            }
            guard let progressHandler else { return (nil, nil) }
            // About ten reports a second, not one per chunk; a count held back is reported at the next tick
            // even when no further byte arrives.
            let next = DispatchTime(uptimeNanoseconds: lastReport.uptimeNanoseconds + 100_000_000)
            if wallClock >= next {
                lastReport = wallClock
                return ((progressHandler, received, expected), nil)
            }
            if reportScheduled { return (nil, nil) }
            reportScheduled = true
            return (nil, next)
        }
        if let (handler, count, total) = report { handler(count, total) }
        if let scheduleAt, let queue = lock.withLock({ delegateQueue }) {
            // Waits on a Dispatch queue, then reports on the delegate queue, in turn with the callbacks.
            DispatchQueue.global().asyncAfter(deadline: scheduleAt) { [weak self] in
                guard let job = self else { return }
                queue.addOperation { job.reportHeldBackProgress() }
            }
        }
        if failure != nil || lock.withLock({ limitError }) != nil { task.cancel() }
    }

    /// On the delegate queue: a report held back by ``didReceive(_:task:)``, unless the task completed.
    private func reportHeldBackProgress() {
        let report: (ProgressHandler, Int64, Int64?)? = lock.withLock {
            reportScheduled = false
            guard !completed, let progressHandler else { return nil }
            lastReport = .now()
            return (progressHandler, received, expected)
        }
        if let (handler, count, total) = report { handler(count, total) }
    }

    /// The task completed: decides the outcome and finishes the job. (On the delegate queue: a held-back
    /// progress report that comes after this finds `completed` and is dropped, so the final report is
    /// the last one.)
    fileprivate func didComplete(error: (any Error)?) {
        let (timer, timedOut, handler, writeError, received, queue, limitError) = lock.withLock {
            completed = true
            // Drop the handler so nothing it captured outlives the job (let go of after unlocking).
            defer { (watchdog, progressHandler, delegateQueue) = (nil, nil, nil) }
            return (
                watchdog, timedOutError, progressHandler, self.writeError, self.received, delegateQueue, self.limitError
            )
        }
        _ = queue
        let (file, body) = (partialFile, self.body)
        (partialFile, self.body) = (nil, Data())
        timer?.cancel()
        // (On Linux, Foundation does not tell the delegate of some responses, such as a redirect without
        // a `Location`: the task still has it.)
        let response = lock.withLock { storedResponse ?? storedTask?.response }
        lock.withLock { storedResponse = response }
        // A status that fails the job says more than what became of its body (an error page too large,
        // or not writable where the download was to go).
        let rejectedStatus: NetworkError? =
            rejects(response)
            ? NetworkError.httpStatus((response as! HTTPURLResponse).statusCode, url: response?.url ?? request.url)
            : nil

        var failure: (any Error)?
        if let limitError {
            failure = rejectedStatus ?? limitError
        } else if let writeError {
            let directory: URL? = if case .download(let directory) = kind { directory } else { nil }
            failure =
                rejectedStatus
                ?? NetworkError.file(
                    url: request.url, path: directory.map(pathForMessages(directory:)) ?? "", error: writeError)
        } else if let error {
            if let urlError = error as? URLError, urlError.code == .cancelled {
                failure = timedOut ?? CancellationError()
            } else if let urlError = error as? URLError, urlError.code == .timedOut {
                failure = NetworkError.sessionTimedOut(
                    url: request.url, after: lock.withLock { requestTimeout }, error: urlError)
            } else {
                failure = NetworkError.transport(url: request.url, error: error)
            }
        } else if let rejectedStatus {
            failure = rejectedStatus
        } else if response == nil {
            failure = NetworkError.noResponse(url: request.url)
        } else if let timedOut {
            failure = timedOut
        } else if isCancelled {
            failure = CancellationError()
        }

        if let file {
            if failure == nil, case .download(let directory) = kind {
                // The whole body on disk before it is moved into place (a crash after the rename must not
                // leave an empty or partial file behind the new name), and a failed close is a failed write.
                do {
                    try Self.syncAndClose(file.handle)
                } catch {
                    failure = NetworkError.file(
                        url: request.url, path: pathForMessages(directory: directory), error: error)
                }
            } else {
                try? file.handle.close()
            }
        }
        var kept: URL?
        if failure == nil, case .download(let directory) = kind {
            do {
                let location = try file?.url ?? emptyFile(in: directory)
                kept = try keepDownload(at: location, in: directory)
                Self.syncDirectory(directory)
            } catch {
                failure = error
            }
        }
        if let location = file?.url, kept != location {
            try? FileManager.default.removeItem(at: location)
        }

        if failure == nil {
            lock.withLock {
                if case .data = kind { storedData = body }
                storedFile = kept
            }
            handler?(received, received)
        }
        finish(failure)
    }

    /// `fsync`s the file, then closes it; throws the first error.
    private static func syncAndClose(_ handle: FileHandle) throws {
        let synced = fsync(handle.fileDescriptor) == 0 ? nil : POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        try handle.close()
        if let synced { throw synced }
    }

    /// `fsync`s a folder, so that a rename in it survives a crash; best effort (some file systems
    /// refuse it, and the file itself is already on disk).
    static func syncDirectory(_ directory: URL) {
        let descriptor = open(directory.path, O_RDONLY)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }

    /// An empty file for a successful download with an empty body.
    private func emptyFile(in directory: URL) throws -> URL {
        do {
            let (url, handle) = try Self.createTemporaryFile(in: directory)
            try? handle.close()
            return url
        } catch {
            throw NetworkError.file(url: request.url, path: pathForMessages(directory: directory), error: error)
        }
    }

    /// A new hidden file in `directory`, open for writing.
    private static func createTemporaryFile(in directory: URL) throws -> (URL, FileHandle) {
        let url = directory.appendingPathComponent("\(temporaryFilePrefix)\(UUID().uuidString)")
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return (url, FileHandle(fileDescriptor: descriptor, closeOnDealloc: true))
    }

    /// The file named when writing the body fails: the download's own file.
    func pathForMessages(directory: URL) -> String { directory.path }

    /// Moves the complete body, in the hidden file at `location` (in `directory`), to where it is kept,
    /// and returns that place. Called once, for a successful response only.
    ///
    /// The default renames it to a new file `download-UUID` in `directory`. ``HTTPDownloadJob``
    /// overrides it to replace its destination atomically. Throw to fail the job; the file at
    /// `location` is then removed.
    func keepDownload(at location: URL, in directory: URL) throws -> URL {
        let target = directory.appendingPathComponent("download-\(UUID().uuidString)")
        do {
            try FileManager.default.moveItem(at: location, to: target)
        } catch {
            throw NetworkError.file(url: request.url, path: target.path, error: error)
        }
        return target
    }
}

/// Receives the task's events and hands them to the job.
private final class TaskDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked Sendable: `job` is immutable, and is itself Sendable.
    let job: URLSessionTaskJob

    init(job: URLSessionTaskJob) { self.job = job }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        job.didReceive(response: response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        job.didReceive(data, task: dataTask)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        job.didComplete(error: error)
    }
}

/// Time on a clock since a start, for the limits of a transfer: keeps the clock's own instants out of
/// ``URLSessionTaskJob``, which is not generic over its clock.
private struct Stopwatch: Sendable {
    /// Time since the start.
    let elapsed: @Sendable () -> Duration
}

extension Clock where Duration == Swift.Duration {
    /// A stopwatch on this clock that starts now.
    fileprivate func startStopwatch() -> Stopwatch {
        let start = now
        return Stopwatch(elapsed: { start.duration(to: self.now) })
    }
}
