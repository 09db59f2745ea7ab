#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Android)
import Android
#endif

/// A non-recursive mutex backed by `pthread_mutex_t`.
///
/// Baton uses pthread mutexes rather than `Synchronization.Mutex` because, on the Linux toolchain we
/// ship on, ThreadSanitizer intermittently reports false races for `Mutex` (see DESIGN.md, rule 4).
///
/// The mutex lives in manually allocated memory so that its address never moves.
///
/// - Important: Never call user code while holding a `Lock`, and never take a second lock while
///   holding one. Baton's code follows both rules everywhere.
package final class Lock: @unchecked Sendable {
    // @unchecked Sendable: the pointee is only touched through pthread calls, which are thread-safe.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// - Parameter adaptive: On Linux, spin briefly before sleeping when the lock is taken
    ///   (`PTHREAD_MUTEX_ADAPTIVE_NP`): for locks held for a few hundred nanoseconds by several threads at
    ///   a high rate, such as a queue's, sleeping and waking costs far more than the wait.
    package init(adaptive: Bool = false) {
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
    package func lock() { pthread_mutex_lock(mutex) }

    @inline(__always)
    package func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always)
    package func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A fixed set of mutexes shared by all jobs: job `n` uses mutex `n % count`.
///
/// A job's lock guards only that job's own fields, and Baton never holds two locks at once, so two
/// jobs sharing a mutex can never deadlock; they can only, rarely, wait briefly for each other.
/// Striping saves an allocation and about 64 bytes per job, which matters when a million jobs wait.
struct LockStripes: @unchecked Sendable {
    // @unchecked Sendable: the mutexes are never deallocated and are used only through pthread calls.
    private static let count = 256
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
        pthread_mutex_lock(pointer)
        defer { pthread_mutex_unlock(pointer) }
        return try body()
    }
}
