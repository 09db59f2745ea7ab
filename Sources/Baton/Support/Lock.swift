#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Android)
import Android
#endif

/// A non-recursive mutex backed by `pthread_mutex_t`, for Baton's own state and its test kit.
///
/// Baton uses pthread mutexes rather than `Synchronization.Mutex` because, on the Linux toolchain we
/// ship on, ThreadSanitizer intermittently reports false races for `Mutex` (see the Concurrency
/// article, rule 4). The mutex lives in manually allocated memory so that its address never moves.
///
/// In debug builds every `Lock` and every job lock checks Baton's two locking rules as it is taken
/// (see ``LockDiscipline``): taking a lock while this thread already holds one stops the program
/// with a message, instead of deadlocking one run in a thousand.
///
/// - Important: Never call user code while holding a `Lock`, and never take a second lock while
///   holding one.
package final class Lock: @unchecked Sendable {
    // @unchecked Sendable: the pointee is only touched through pthread calls, which are thread-safe.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Whether taking this lock counts for ``LockDiscipline`` (Baton's own locks and its test kit's do;
    /// the lock inside a user's ``Protected`` value does not).
    private let checked: Bool

    /// - Parameter adaptive: On Linux, spin briefly before sleeping when the lock is taken
    ///   (`PTHREAD_MUTEX_ADAPTIVE_NP`): for locks held for a few hundred nanoseconds by several threads at
    ///   a high rate, such as a queue's, sleeping and waking costs far more than the wait.
    /// - Parameter checked: Whether ``LockDiscipline`` counts this lock.
    package init(adaptive: Bool = false, checked: Bool = true) {
        self.checked = checked
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        defer { pthread_mutexattr_destroy(&attributes) }
        #if canImport(Glibc)
        if adaptive { pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP)) }
        #endif
        let rc = pthread_mutex_init(mutex, &attributes)
        precondition(rc == 0, "Baton: pthread_mutex_init failed with \(rc)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    @inline(__always)
    package func withLock<T>(_ body: () throws -> T) rethrows -> T {
        if checked { LockDiscipline.willLock() }
        pthread_mutex_lock(mutex)
        defer {
            pthread_mutex_unlock(mutex)
            if checked { LockDiscipline.didUnlock() }
        }
        return try body()
    }
}

/// A fixed set of mutexes shared by all jobs: job `n` uses mutex `n % count`.
///
/// A job's lock guards only that job's own fields. Two jobs that share a mutex could deadlock only if
/// code held one job's lock while taking another's, or released a job (whose `deinit` locks it) while
/// holding a lock. Baton does neither, by construction: every locked region moves the references it
/// gives up out and drops them after unlocking, and takes no other lock. In debug builds
/// ``LockDiscipline`` checks both at run time, so a test that breaks either rule stops with a message
/// whatever the job numbers (a stripe collision would otherwise show up one run in 256).
///
/// Striping saves an allocation and about 64 bytes per job, which matters when a million jobs wait.
struct LockStripes: @unchecked Sendable {
    // @unchecked Sendable: the mutexes are never deallocated and are used only through pthread calls.
    static let count = 256
    /// One cache line per mutex so that unrelated jobs on different cores do not share a line.
    private static let stride = 64
    nonisolated(unsafe) private static let base: UnsafeMutableRawPointer = {
        precondition(MemoryLayout<pthread_mutex_t>.size <= stride)
        let raw = UnsafeMutableRawPointer.allocate(byteCount: count * stride, alignment: stride)
        for i in 0..<count {
            let m = (raw + i * stride).bindMemory(to: pthread_mutex_t.self, capacity: 1)
            m.initialize(to: pthread_mutex_t())
            pthread_mutex_init(m, nil)
        }
        return raw
    }()

    static func mutex(for id: UInt64) -> StripedMutex {
        let slot = Int(truncatingIfNeeded: id % UInt64(count))
        return StripedMutex(pointer: (base + slot * stride).assumingMemoryBound(to: pthread_mutex_t.self))
    }
}

/// A reference to one of the ``LockStripes`` mutexes.
struct StripedMutex: @unchecked Sendable {
    // @unchecked Sendable: the pointee is process-lifetime and only used through pthread calls.
    let pointer: UnsafeMutablePointer<pthread_mutex_t>

    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        LockDiscipline.willLock()
        pthread_mutex_lock(pointer)
        defer {
            pthread_mutex_unlock(pointer)
            LockDiscipline.didUnlock()
        }
        return try body()
    }
}

/// Checks, in debug builds, the two rules that make Baton's locking deadlock-free: never take a lock
/// while holding one, and never release a job while holding one. In release builds every check
/// compiles to nothing.
///
/// Each thread counts the Baton locks it holds. Taking a second one, or a job's `deinit` running
/// while one is held, stops the program with a message naming the rule. The checks are what make
/// the shared lock stripes safe to keep: they turn a one-in-256 hang into a failure of every test
/// that takes the wrong path.
package enum LockDiscipline {
    #if DEBUG
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key, nil)
        precondition(rc == 0, "Baton: pthread_key_create failed with \(rc)")
        return key
    }()

    /// The number of Baton locks the calling thread holds.
    package static var heldByThisThread: Int {
        Int(bitPattern: pthread_getspecific(key))
    }

    private static func setHeld(_ count: Int) {
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: count))
    }
    #endif

    @inline(__always)
    static func willLock() {
        #if DEBUG
        let held = heldByThisThread
        if held > 0 {
            fatalError(
                "Baton internal error: a lock was taken while this thread already held one (rule 2: never hold two locks). User code called under a lock can cause this too."
            )
        }
        setHeld(held + 1)
        #endif
    }

    @inline(__always)
    static func didUnlock() {
        #if DEBUG
        setHeld(heldByThisThread - 1)
        #endif
    }

    /// Stops the program if the calling thread holds a Baton lock: `what` is about to happen, which
    /// must never happen under a lock (a job's `deinit` locks the job's stripe).
    @inline(__always)
    static func checkNoLockHeld(_ what: @autoclosure () -> String) {
        #if DEBUG
        if heldByThisThread > 0 {
            fatalError("Baton internal error: \(what()) while a lock was held (never release objects under a lock).")
        }
        #endif
    }
}
