import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file that a command's user named for its output (`earthquakes --timeline`, `baton timeline -o`).
///
/// It is written the way a shell's `>` writes, not by replacing the path: through symbolic links (the
/// file they lead to is written, the links stay), and straight into what is not a regular file (a FIFO,
/// a device, `/dev/stdout`). A regular file is replaced atomically, so a reader never sees half a page.
package enum OutputFile {
    /// Why a file could not be written: the system's words.
    package struct Failure: Error, LocalizedError, CustomStringConvertible {
        package let path: String
        package let code: Int32
        package var errorDescription: String? { String(cString: strerror(code)) }
        package var description: String { "cannot write \(path): \(errorDescription ?? "")" }
    }

    /// Why `path` cannot be written, worded to follow the option and the path ("-o x/run.html: the folder
    /// x does not exist; …"), or nil: an empty path, a folder, a folder that does not exist or cannot be
    /// written in, or a device or FIFO that cannot be written. Checked before a command does its work, so
    /// that the page it makes afterwards has somewhere to go. The folder is the one the path's symbolic
    /// links lead to, where ``write(_:to:)`` writes; `example` is a file name to suggest.
    package static func problem(_ path: String, example: String) -> String? {
        guard !path.isEmpty else { return ": no file name is given; give the file to write, for example \(example)" }
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & S_IFMT != S_IFREG, status.st_mode & S_IFMT != S_IFDIR {
            guard access(path, W_OK) == 0 else {
                return ": cannot write to it (\(String(cString: strerror(errno)))); give a path you can write to"
            }
            return nil
        }
        let folder = URL(fileURLWithPath: followingLinks(path)).deletingLastPathComponent().path
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            return ": the folder \(folder) does not exist; create it or give another path"
        }
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
            return " is a folder; give a file path inside it, for example "
                + (path as NSString).appendingPathComponent(example)
        }
        if let reason = unwritableReason(folder: folder) {
            return ": cannot write in the folder \(folder) (\(reason)); give a path in a folder you can write to"
        }
        return nil
    }

    /// Why no file can be created in `folder` (tried with a file of its own, removed at once), or nil.
    /// Trying is the only reliable test: permissions say nothing of a read-only file system, nor of
    /// what the superuser may do.
    static func unwritableReason(folder: String) -> String? {
        let probe = (folder as NSString).appendingPathComponent(
            ".baton-output-check-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)")
        let descriptor = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        close(descriptor)
        unlink(probe)
        return nil
    }

    /// Writes `text` to the file at `path` (see the type).
    package static func write(_ text: String, to path: String) throws {
        var given = stat()
        guard stat(path, &given) == 0 else {
            let code = errno
            guard code == ENOENT else { throw Failure(path: path, code: code) }  // a loop of links, say
            // Not there yet, or a link to a file not made yet: made where the links lead, atomically.
            try text.write(toFile: followingLinks(path), atomically: true, encoding: .utf8)
            return
        }
        let type = given.st_mode & S_IFMT
        if type == S_IFDIR { throw Failure(path: path, code: EISDIR) }
        if type == S_IFREG {
            // Replaced atomically where the links lead, when that is the file the kernel reaches; not for
            // a link the kernel resolves its own way (`/dev/stdout`, `/proc/self/fd/1`), which is written into.
            let target = followingLinks(path)
            var resolved = stat()
            if stat(target, &resolved) == 0, resolved.st_dev == given.st_dev, resolved.st_ino == given.st_ino {
                try text.write(toFile: target, atomically: true, encoding: .utf8)
                return
            }
        }
        try writeInto(path, text, truncating: type == S_IFREG)
    }

    /// Opens `path` for writing, as a shell's `>` does, and writes all of `text`.
    private static func writeInto(_ path: String, _ text: String, truncating: Bool) throws {
        let descriptor = open(path, O_WRONLY | (truncating ? O_TRUNC : 0))
        guard descriptor >= 0 else { throw Failure(path: path, code: errno) }
        defer { close(descriptor) }
        if let failure = writeAll(Array(text.utf8), to: descriptor) { throw Failure(path: path, code: failure) }
    }

    /// Writes all of `bytes` to `descriptor` with `write(2)`, through interruptions and a descriptor that
    /// another program left non-blocking; returns the `errno` of a failure, `nil` when everything was
    /// written. (The tools write their standard output with it too.)
    package static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Int32? {
        bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Int32? in
            guard let base = raw.baseAddress else { return nil }
            var offset = 0
            while offset < raw.count {
                let written = systemWrite(descriptor, base + offset, raw.count - offset)
                if written < 0, errno == EINTR { continue }
                if written < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                    var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&ready, 1, -1)
                    continue
                }
                if written < 0 { return errno }
                if written == 0 { return EIO }
                offset += written
            }
            return nil
        }
    }

    /// `write(2)` (the type's own `write` hides it).
    private static func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.write(descriptor, buffer, count)
        #elseif canImport(Musl)
        Musl.write(descriptor, buffer, count)
        #else
        Darwin.write(descriptor, buffer, count)
        #endif
    }

    /// `path` with its symbolic links followed (a link to a file not made yet gives that file's path).
    package static func followingLinks(_ path: String) -> String {
        var target = path
        for _ in 0..<40 {  // as the kernel's limit on links in a path: a loop ends here
            guard let destination = try? FileManager.default.destinationOfSymbolicLink(atPath: target) else {
                break
            }
            let folder = (target as NSString).deletingLastPathComponent
            target = destination.hasPrefix("/") || folder.isEmpty ? destination : folder + "/" + destination
        }
        return target
    }
}
