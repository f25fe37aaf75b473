import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// A strict XML parse into a small tree, names as written (`sparkle:version`) with their namespace URIs.
public final class XMLTree: NSObject, XMLParserDelegate {
    public final class Element {
        public let name: String
        public let namespace: String?
        public let attributes: [String: String]
        public internal(set) var children: [Element] = []
        public internal(set) var text = ""

        init(name: String, namespace: String?, attributes: [String: String]) {
            self.name = name
            self.namespace = namespace
            self.attributes = attributes
        }

        public func child(_ name: String) -> Element? { children.first { $0.name == name } }
        public func children(_ name: String) -> [Element] { children.filter { $0.name == name } }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    private var stack: [Element] = []
    private var root: Element?

    public static func parse(_ xml: String) throws -> Element {
        let parser = XMLParser(data: Data(xml.utf8))
        parser.shouldProcessNamespaces = true
        parser.shouldReportNamespacePrefixes = true
        let tree = XMLTree()
        parser.delegate = tree
        guard parser.parse(), let root = tree.root else {
            throw Failure(description: "not well-formed XML: \(parser.parserError.map { "\($0)" } ?? "no root")\n\(xml.prefix(2_000))")
        }
        return root
    }

    public func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        let element = Element(
            name: qualifiedName ?? elementName, namespace: namespaceURI.flatMap { $0.isEmpty ? nil : $0 },
            attributes: attributes)
        stack.last?.children.append(element)
        stack.append(element)
    }

    public func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        let element = stack.removeLast()
        if stack.isEmpty { root = element }
    }

    public func parser(_ parser: XMLParser, foundCharacters string: String) {
        stack.last?.text += string
    }
}
