/// The answer to `POST /v1/events` (DESIGN.md section 5).
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

        public init(index: Int, id: String?, status: Status, rejection: EventRejection? = nil) {
            self.index = index
            self.id = id
            self.status = status
            self.error = rejection?.code
            self.field = rejection?.field
            self.message = rejection?.message
        }
    }

    public var accepted: Int
    public var duplicates: Int
    public var rejected: Int
    public var results: [Result]

    public init(results: [Result]) {
        self.results = results
        accepted = results.count { $0.status == .accepted }
        duplicates = results.count { $0.status == .duplicate }
        rejected = results.count { $0.status == .rejected }
    }
}
