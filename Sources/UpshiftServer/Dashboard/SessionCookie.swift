import Foundation
import Hummingbird

/// The dashboard's session cookie: `HttpOnly`, `SameSite=Strict`, for `/dashboard` only, and `Secure`
/// when a proxy says the browser spoke HTTPS (`X-Forwarded-Proto: https`; trusting the header is
/// harmless, since `Secure` only keeps the cookie off plain HTTP).
enum SessionCookie {
    static let name = "upshift_session"
    static let lifetime: TimeInterval = 12 * 3_600

    static func setting(_ token: String, for request: Request) -> Cookie {
        Cookie(
            name: name, value: token, maxAge: Int(lifetime), path: "/dashboard", secure: isHTTPS(request), httpOnly: true,
            sameSite: .strict)
    }

    static func clearing(for request: Request) -> Cookie {
        Cookie(name: name, value: "", maxAge: 0, path: "/dashboard", secure: isHTTPS(request), httpOnly: true, sameSite: .strict)
    }

    private static func isHTTPS(_ request: Request) -> Bool {
        request.headers[.xForwardedProto]?.lowercased() == "https"
    }
}
