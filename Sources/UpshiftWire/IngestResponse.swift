/// The answer to `POST /v1/events` (docs/openapi.yaml, schema "IngestResponse").
public struct IngestResponse: Codable, Sendable, Equatable {
    public enum Status: String, Codable, Sendable {
        case accepted, duplicate, rejected
    }

    public struct Result: Codable, Sendable, Equatable {
        public var index: Int
        /// The event's id as posted (absent when it had none).
        public var id: String?
        public var status: Status
        /// The rejection code, for rejected events.
        public var error: String?
        public var field: String?
        public var message: String?
        /// The event's members the server did not read (an unknown name, or a field of another event type).
        public var ignored: [String]?

        public init(
            index: Int, id: String?, status: Status, error: String? = nil, field: String? = nil, message: String? = nil,
            ignored: [String]? = nil
        ) {
            self.index = index
            self.id = id
            self.status = status
            self.error = error
            self.field = field
            self.message = message
            self.ignored = ignored
        }
    }

    public var accepted: Int
    public var duplicates: Int
    public var rejected: Int
    public var results: [Result]

    /// The response as JSON text, written by hand: it is on every ingestion request, and JSONEncoder
    /// was a large part of that request's cost.
    public var json: String {
        var text = "{\"accepted\":"
        text.reserveCapacity(64 + results.count * 80)
        text += String(accepted)
        text += ",\"duplicates\":"
        text += String(duplicates)
        text += ",\"rejected\":"
        text += String(rejected)
        text += ",\"results\":["
        for (position, result) in results.enumerated() {
            text += position > 0 ? ",{\"index\":" : "{\"index\":"
            text += String(result.index)
            if let id = result.id {
                text += ",\"id\":"
                JSONText.appendQuoted(id, to: &text)
            }
            text += ",\"status\":\""
            text += result.status.rawValue
            text += "\""
            if let error = result.error {
                text += ",\"error\":"
                JSONText.appendQuoted(error, to: &text)
            }
            if let field = result.field {
                text += ",\"field\":"
                JSONText.appendQuoted(field, to: &text)
            }
            if let message = result.message {
                text += ",\"message\":"
                JSONText.appendQuoted(message, to: &text)
            }
            if let ignored = result.ignored {
                text += ",\"ignored\":["
                for (position, name) in ignored.enumerated() {
                    if position > 0 { text += "," }
                    JSONText.appendQuoted(name, to: &text)
                }
                text += "]"
            }
            text += "}"
        }
        text += "]}"
        return text
    }

    public init(results: [Result]) {
        self.results = results
        accepted = results.count { $0.status == .accepted }
        duplicates = results.count { $0.status == .duplicate }
        rejected = results.count { $0.status == .rejected }
    }
}
