import Foundation
import Logging
import UpshiftCore

/// The server's log handler: one line per message on standard error, in swift-log's text format
/// (`2026-11-27T10:00:00+0000 warning upshift: key=value [module] message`, as `StreamLogHandler` writes it)
/// or, with `UPSHIFT_LOG_FORMAT=json`, one JSON object for log shippers:
/// `{"ts":…,"level":…,"label":…,"message":…,"<metadata key>":…}`.
///
/// Metadata is rendered when a line is written, never when it is set. Hummingbird gives every request
/// a logger with its own request id, and `StreamLogHandler` renders all of a logger's metadata again
/// on each set: 1–4 % of the server's CPU under the benchmarks' load, for lines that are almost never written.
struct LineLogHandler: LogHandler {
    enum Format: Sendable { case text, json }

    let label: String
    let format: Format
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields = metadata
        metadataProvider.map { fields.merge($0.get()) { _, new in new } }
        event.metadata.map { fields.merge($0) { _, new in new } }
        if let error = event.error {
            fields["error.message"] = "\(error)"
            fields["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        let sorted = fields.sorted { $0.key < $1.key }
        var line: String
        switch format {
        case .text:
            line = "\(Self.localTimestamp()) \(event.level)\(label.isEmpty ? "" : " ")\(label):"
            for (key, value) in sorted { line += " \(key)=\(value)" }
            line += " [\(event.source)] \(event.message)\n"
        case .json:
            line = "{\"ts\":\"\(Timestamp.format(Date()))\",\"level\":\"\(event.level.rawValue)\""
            line += ",\"label\":\(JSONText.quoted(label)),\"message\":\(JSONText.quoted(event.message.description))"
            for (key, value) in sorted { line += ",\(JSONText.quoted(key)):\(JSONText.quoted(value.description))" }
            line += "}\n"
        }
        // A line that cannot be written (a full disk, a closed stream) is lost, and the server goes on.
        try? FileHandle.standardError.write(contentsOf: Data(line.utf8))
    }

    /// Local time as `StreamLogHandler` writes it: `%Y-%m-%dT%H:%M:%S%z`.
    private static func localTimestamp() -> String {
        var now = time(nil)
        var parts = tm()
        guard localtime_r(&now, &parts) != nil else { return "<unknown>" }
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
