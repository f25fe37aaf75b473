import Foundation
import UpshiftTestSupport

enum TestPaths {
    static var migrations: URL { TestEnvironment.migrationsDirectory }
}
