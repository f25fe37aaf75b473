/// The nginx of `scripts/bench check`, case (a): one file served as a static file on every path, one
/// worker per core as upshift has an event loop per core, keep-alive, no access log, tuned as for static
/// files (sendfile, open file cache). Not the system's nginx service: its own prefix, in the run's folder.
public struct NginxConfiguration: Sendable {
    /// The folder of its pid file, logs and temporary files.
    public var folder: String
    public var port: Int
    public var workers: Int
    /// The folder holding the file, and its name.
    public var root: String
    public var file: String

    public init(folder: String, port: Int, workers: Int, root: String, file: String) {
        self.folder = folder
        self.port = port
        self.workers = workers
        self.root = root
        self.file = file
    }

    public var text: String {
        """
        # nginx of scripts/bench check, case (a): .bench/\(file) as a static file on every path, one
        # worker per core as upshift has an event loop per core, keep-alive, no access log, tuned as for static
        # files (sendfile, open file cache).
        worker_processes \(workers);
        pid \(folder)/nginx.pid;
        error_log \(folder)/error.log warn;
        daemon off;
        events {
            worker_connections 1024;
        }
        http {
            access_log off;
            sendfile on;
            tcp_nopush on;
            tcp_nodelay on;
            keepalive_timeout 65s;
            keepalive_requests 100000000;
            open_file_cache max=16 inactive=60s;
            client_body_temp_path \(folder)/tmp/body;
            proxy_temp_path \(folder)/tmp/proxy;
            fastcgi_temp_path \(folder)/tmp/fastcgi;
            uwsgi_temp_path \(folder)/tmp/uwsgi;
            scgi_temp_path \(folder)/tmp/scgi;
            types { }
            default_type application/json;
            server {
                listen 127.0.0.1:\(port);
                location / {
                    root \(root);
                    try_files /\(file) =404;
                }
            }
        }

        """
    }
}
