// Core is the wire types (what apps and the server exchange) plus what only the server needs: code that
// imports Core sees both.
@_exported import UpshiftWire
