import Foundation
import Logging
import UpshiftCore

/// One JSON object per line on standard error (`UPSHIFT_LOG_FORMAT=json`), for log shippers:
/// `{"ts":…,"level":…,"label":…,"message":…,"<metadata key>":…}`.
struct JSONLogHandler: LogHandler {
    let label: String
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
        var line = "{\"ts\":\"\(Timestamp.format(Date()))\",\"level\":\"\(event.level.rawValue)\""
        line += ",\"label\":\(quoted(label)),\"message\":\(quoted(event.message.description))"
        for (key, value) in fields.sorted(by: { $0.key < $1.key }) {
            line += ",\(quoted(key)):\(quoted(value.description))"
        }
        line += "}\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    private func quoted(_ text: String) -> String { JSONText.quoted(text) }
}
