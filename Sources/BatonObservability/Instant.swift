import Dispatch

/// Monotonic nanoseconds (since boot), cheap to read: the clock of every instrument here.
enum Instant {
    static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }
}
