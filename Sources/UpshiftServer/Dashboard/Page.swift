import Foundation
import Hummingbird
import NIOCore
import UpshiftCore
import UpshiftStore

/// The dashboard's page frame: one stylesheet inline (no external files, fonts or scripts), light and
/// dark through `prefers-color-scheme`, readable at phone width.
struct Page: Sendable {
    var title: String
    /// The signed-in key's label and the form token for sign-out; nil on the sign-in page.
    var signedIn: (name: String, scope: String, csrf: String)?
    var navigation: [(label: String, href: String)] = []
    var body: HTML

    func response(status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) -> Response {
        var headers: HTTPFields = [
            .contentType: "text/html; charset=utf-8",
            .cacheControl: "no-store",
            // Nothing but this page's own inline style; no scripts at all, no framing.
            .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            .init("X-Content-Type-Options")!: "nosniff",
            .init("Referrer-Policy")!: "same-origin",
        ]
        headers.append(contentsOf: extra)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html.text)))
    }

    var html: HTML {
        let account: HTML =
            if let signedIn {
                """
                <form method="post" action="/dashboard/sign-out" class="signout">\
                <span class="who">\(signedIn.name) · \(signedIn.scope)</span>\
                <input type="hidden" name="csrf" value="\(signedIn.csrf)"><button type="submit">Sign out</button></form>
                """
            } else { "" }
        let links = navigation.map { item -> HTML in "<a href=\"\(item.href)\">\(item.label)</a>" }
        let nav: HTML = links.isEmpty ? "" : "<nav aria-label=\"Sections\">\(links)</nav>"
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="color-scheme" content="light dark">
            <title>\(title) · Upshift</title>
            <style>\(HTML(raw: Self.stylesheet))</style></head>
            <body><header><a class="brand" href="/dashboard">Upshift</a>\(nav)\(account)</header>
            <main id="main"><h1>\(title)</h1>
            \(body)
            </main></body></html>
            """
    }

    static let stylesheet = """
        :root{--bg:#fff;--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--panel:#f6f8fa;--accent:#0a58ca;--bad:#b42318;--ok:#1a7f37;\
        --s0:#1f6feb;--s1:#2da44e;--s2:#bf8700;--s3:#cf222e;--s4:#8250df;--s5:#1b7c83;--s6:#bc4c00;--s7:#6e7781;--older:#aab4bf}
        @media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9da7b3;--line:#30363d;--panel:#161b22;\
        --accent:#6cb6ff;--bad:#ff7b72;--ok:#3fb950;--s0:#58a6ff;--s1:#3fb950;--s2:#d29922;--s3:#ff7b72;--s4:#bc8cff;\
        --s5:#39c5cf;--s6:#f0883e;--s7:#8b949e;--older:#484f58}}
        *{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;background:var(--bg);color:var(--fg)}
        header{display:flex;flex-wrap:wrap;gap:.75rem 1.5rem;align-items:center;padding:.75rem 1rem;border-bottom:1px solid var(--line);background:var(--panel)}
        header nav{display:flex;flex-wrap:wrap;gap:1rem}.brand{font-weight:700;color:var(--fg);text-decoration:none}
        .signout{margin-left:auto;display:flex;gap:.5rem;align-items:center}.who{color:var(--muted);font-size:.9rem}
        main{max-width:980px;margin:0 auto;padding:1rem}h1{font-size:1.5rem;margin:.5rem 0 1rem}h2{font-size:1.15rem;margin:2rem 0 .5rem}
        a{color:var(--accent)}table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums;font-size:.95rem}
        th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}td.n,th.n{text-align:right}
        .scroll{overflow-x:auto}.chart{width:100%;height:auto;display:block}.chart text{font-size:12px;fill:var(--muted)}
        .chart .grid{stroke:var(--line);stroke-width:1}.chart .axisline{stroke:var(--muted)}.chart .empty{font-size:15px}
        .chart .mark{stroke:var(--muted);stroke-dasharray:3 3}.chart .line{fill:none;stroke:var(--s0);stroke-width:2.5}.chart .dot{fill:var(--s0)}
        .s0{fill:var(--s0);background:var(--s0)}.s1{fill:var(--s1);background:var(--s1)}.s2{fill:var(--s2);background:var(--s2)}\
        .s3{fill:var(--s3);background:var(--s3)}.s4{fill:var(--s4);background:var(--s4)}.s5{fill:var(--s5);background:var(--s5)}\
        .s6{fill:var(--s6);background:var(--s6)}.s7{fill:var(--s7);background:var(--s7)}.older{fill:var(--older);background:var(--older)}
        .legend{display:flex;flex-wrap:wrap;gap:.25rem 1rem;list-style:none;padding:0;margin:.5rem 0}.swatch{display:inline-block;width:.9rem;height:.9rem;border-radius:2px;margin-right:.35rem;vertical-align:-.1rem}
        details{margin:.5rem 0 1rem}summary{cursor:pointer;color:var(--accent)}
        .figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(9rem,1fr));gap:.75rem;margin:1rem 0}
        .figure{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:.5rem .75rem}.figure b{display:block;font-size:1.3rem}
        .figure span{color:var(--muted);font-size:.85rem}
        form.stack{display:grid;gap:.75rem;max-width:36rem}form.inline{display:flex;flex-wrap:wrap;gap:.5rem;align-items:end;margin:.25rem 0}
        label{display:grid;gap:.2rem;font-size:.9rem}.check{display:flex;gap:.5rem;align-items:center}
        input,button,select{font:inherit;color:var(--fg);background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:.35rem .55rem}
        input[type=checkbox]{width:1.1rem;height:1.1rem}button{cursor:pointer;background:var(--panel)}button.primary{background:var(--accent);color:var(--bg);border-color:var(--accent)}
        button.danger{color:var(--bad);border-color:var(--bad)}:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
        .notice{padding:.6rem .8rem;border-radius:6px;border:1px solid var(--line);background:var(--panel)}.notice.error{border-color:var(--bad);color:var(--bad)}
        .notice.ok{border-color:var(--ok);color:var(--ok)}.muted{color:var(--muted)}.choices{display:flex;flex-wrap:wrap;gap:.75rem;margin:.25rem 0 1rem}
        .choices a[aria-current]{font-weight:700;color:var(--fg);text-decoration:none}
        @media (max-width:600px){main{padding:.75rem}th,td{padding:.3rem}.signout{margin-left:0}}
        """
}

extension Page {
    /// A page of a signed-in caller: the sections of `app` (the rollout only for who may change it) and
    /// the sign-out form.
    static func framed(_ identity: Identity, title: String, app: AppID? = nil, platform: Platform? = nil, body: HTML) -> Page {
        var navigation: [(String, String)] = [("Apps", "/dashboard")]
        if let app {
            let query = platform.map { "?platform=\(DashboardForm.escape($0))" } ?? ""
            navigation.append(("Overview", "/dashboard/apps/\(app)\(query)"))
            if identity.mayWrite { navigation.append(("Rollout", "/dashboard/apps/\(app)/rollout\(query)")) }
            navigation.append(("Rules", "/dashboard/apps/\(app)/rules"))
            navigation.append(("History", "/dashboard/apps/\(app)/history"))
            if identity.mayWrite { navigation.append(("Webhooks", "/dashboard/apps/\(app)/webhooks")) }
            if identity.mayWrite { navigation.append(("Settings", "/dashboard/apps/\(app)/settings")) }
        }
        return Page(
            title: title, signedIn: (identity.key.name, identity.key.scope.rawValue, identity.session?.csrfToken ?? ""),
            navigation: navigation, body: body)
    }
}
