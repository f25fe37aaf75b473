import Hummingbird

/// Turns every error into a problem response (``ProblemDetails/from(_:logger:)``), a path that exists
/// asked with another method into `405`, and marks every answer `X-Content-Type-Options: nosniff`.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    var routes: RouteTable?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            var problem = ProblemDetails.from(error, logger: context.logger)
            if let methods = routes?.methods(of: request.uri.path) { problem = .methodNotAllowed(methods) }
            response = try problem.response(from: request, context: context)
        } catch {
            response = try ProblemDetails.from(error, logger: context.logger).response(from: request, context: context)
        }
        if response.headers[.xContentTypeOptions] == nil { response.headers[.xContentTypeOptions] = "nosniff" }
        return response
    }
}
