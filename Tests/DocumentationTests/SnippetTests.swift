import Foundation
import Testing

/// Every Swift code block in the README and the DocC articles is compiled: it must be, line for line,
/// a snippet of `Tests/DocumentationTests/Snippets`, which this target compiles (and some tests run).
///
/// A snippet is the text between `// snippet: NAME` and `// end snippet` in those files, without the
/// indentation of its marker or blank lines at its ends; the parts of one name are joined with a blank
/// line in file order, so that
/// declarations (at file level) and statements (in a function) can make one block.
@Suite("Documentation snippets")
struct SnippetTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The snippets by name.
    static func snippets() throws -> [String: String] {
        let folder = root.appendingPathComponent("Tests/DocumentationTests/Snippets")
        var parts: [String: [String]] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        where file.hasSuffix(".swift") {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            var name: String?
            var indent = 0
            var lines: [String] = []
            for line in text.components(separatedBy: "\n") {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix("// snippet: ") {
                    name = String(trimmed.dropFirst("// snippet: ".count))
                    indent = line.prefix { $0 == " " }.count
                    lines = []
                } else if trimmed == "// end snippet", let current = name {
                    // Blank lines at either end are the formatter's (after imports), not the snippet's.
                    while lines.first?.isEmpty == true { lines.removeFirst() }
                    while lines.last?.isEmpty == true { lines.removeLast() }
                    parts[current, default: []].append(lines.joined(separator: "\n"))
                    name = nil
                } else if name != nil {
                    lines.append(line.prefix(indent).allSatisfy { $0 == " " } ? String(line.dropFirst(indent)) : line)
                }
            }
        }
        return parts.mapValues { $0.joined(separator: "\n\n") }
    }

    /// The Swift code blocks of a Markdown file, with the line each begins on.
    static func swiftBlocks(in file: URL) throws -> [(line: Int, code: String)] {
        var blocks: [(Int, String)] = []
        var current: [String]?
        var start = 0
        let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
        for (number, line) in lines.enumerated() {
            if current == nil, line.hasPrefix("```swift") {
                current = []
                start = number + 2
            } else if current != nil, line.hasPrefix("```") {
                blocks.append((start, current!.joined(separator: "\n")))
                current = nil
            } else if current != nil {
                current!.append(line)
            }
        }
        return blocks
    }

    static var documents: [URL] {
        var files = [root.appendingPathComponent("README.md")]
        let sources = root.appendingPathComponent("Sources")
        for module in (try? FileManager.default.contentsOfDirectory(atPath: sources.path)) ?? [] {
            let catalog = sources.appendingPathComponent(module).appendingPathComponent("\(module).docc")
            for article in (try? FileManager.default.contentsOfDirectory(atPath: catalog.path)) ?? []
            where article.hasSuffix(".md") {
                files.append(catalog.appendingPathComponent(article))
            }
        }
        return files.sorted { $0.path < $1.path }
    }

    @Test("every Swift block of the README and the DocC articles is a compiled snippet")
    func everyBlockIsCompiled() throws {
        let snippets = Set(try Self.snippets().values)
        var checked = 0
        for file in Self.documents {
            for (line, code) in try Self.swiftBlocks(in: file) {
                checked += 1
                #expect(
                    snippets.contains(code),
                    "\(file.path.dropFirst(Self.root.path.count + 1)):\(line): this Swift block is not a snippet of Tests/DocumentationTests/Snippets (copy it there, between // snippet: NAME and // end snippet, where it compiles)"
                )
            }
        }
        #expect(checked >= 10, "only \(checked) Swift blocks found: are the documents where this test looks?")
    }
}
