import NIOCore
import PostgresNIO
import UpshiftCore

/// A checked name (a platform, an app id) is bound and read as its text; a stored text that breaks its rule
/// fails to decode.
/// (Extensions of PostgresNIO's protocols where the type is a checked name: more specific than PostgresNIO's
/// own for any `Codable` type, which binds JSON.)
extension PostgresEncodable where Self: CheckedName {
    public static var psqlType: PostgresDataType { String.psqlType }
    public static var psqlFormat: PostgresFormat { String.psqlFormat }
}

extension PostgresNonThrowingEncodable where Self: CheckedName {
    public func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        rawValue.encode(into: &byteBuffer, context: context)
    }
}

extension PostgresArrayEncodable where Self: CheckedName {
    public static var psqlArrayType: PostgresDataType { String.psqlArrayType }
}

extension PostgresDecodable where Self: CheckedName {
    public init<JSONDecoder: PostgresJSONDecoder>(
        from byteBuffer: inout ByteBuffer, type: PostgresDataType, format: PostgresFormat,
        context: PostgresDecodingContext<JSONDecoder>
    ) throws {
        let text = try String(from: &byteBuffer, type: type, format: format, context: context)
        guard let name = Self(validating: text) else { throw PostgresDecodingError.Code.failure }
        self = name
    }
}

extension Platform: PostgresNonThrowingEncodable, PostgresArrayEncodable, PostgresDecodable, PostgresArrayDecodable {}
extension AppID: PostgresNonThrowingEncodable, PostgresArrayEncodable, PostgresDecodable, PostgresArrayDecodable {}
