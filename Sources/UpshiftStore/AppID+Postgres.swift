import NIOCore
import PostgresNIO
import UpshiftCore

/// An app id is bound and read as its text (`text`); a stored one that breaks the rule fails to decode.
extension AppID: PostgresNonThrowingEncodable, PostgresArrayEncodable, PostgresDecodable, PostgresArrayDecodable {
    public static var psqlType: PostgresDataType { String.psqlType }
    public static var psqlFormat: PostgresFormat { String.psqlFormat }
    public static var psqlArrayType: PostgresDataType { String.psqlArrayType }

    public func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        rawValue.encode(into: &byteBuffer, context: context)
    }

    public init<JSONDecoder: PostgresJSONDecoder>(
        from byteBuffer: inout ByteBuffer, type: PostgresDataType, format: PostgresFormat,
        context: PostgresDecodingContext<JSONDecoder>
    ) throws {
        let text = try String(from: &byteBuffer, type: type, format: format, context: context)
        guard let app = AppID(validating: text) else { throw PostgresDecodingError.Code.failure }
        self = app
    }
}
