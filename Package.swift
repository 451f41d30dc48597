// swift-tools-version:6.0
import PackageDescription

// Swift 6 language mode (set below) brings complete strict concurrency checking.
// Release builds drop the run-time exclusivity checks: they cost about 5% of the request path,
// and the compile-time checks still hold.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "Receptionist",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "receptionist", targets: ["receptionist"]),
        .executable(name: "receptionist-bench", targets: ["receptionist-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "5.0.1"),
    ],
    targets: [
        // C libraries, one module map each.
        .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        // Debian ships no .pc for http-parser; the module map links http_parser directly.
        .systemLibrary(name: "CHTTPParser", providers: [.apt(["libhttp-parser-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // zlib for permessage-deflate; imported by one file of the wire module (`ZlibStream`).
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // SQLite for the disk engine; imported by one file of it (`SQLiteDatabase`).
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        // libcurl for the calls the gateway makes to the backend's hooks, driven by the loop through
        // its multi-socket interface; imported by one folder of the loop module (`outbound`).
        .systemLibrary(name: "CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // hiredis and its libuv adapter, a header of static functions compiled once here. Linked by
        // name: Debian's hiredis.pc adds a compiler flag SwiftPM refuses. Only the loop module uses it.
        .target(name: "CHiredis", linkerSettings: [.linkedLibrary("hiredis"), .linkedLibrary("uv")]),
        // The commit a binary was built from, written in after the link (scripts/stamp-commit.py).
        .target(name: "CBuildStamp"),

        // Primitives every other module may share: locks, threads, thread-confined boxes and
        // immutable byte buffers. No IO.
        .target(name: "ReceptionistSync", swiftSettings: strict),
        // JSON values and their text codec: pure. Numbers keep their literal, objects their order.
        .target(
            name: "ReceptionistJSON", dependencies: [.product(name: "OrderedCollections", package: "swift-collections")],
            swiftSettings: strict),
        // Pure codecs: bytes in, values out. No IO, no clock, no threads.
        .target(
            name: "ReceptionistWire", dependencies: ["CHTTPParser", "COpenSSL", "CZlib", "ReceptionistJSON"],
            swiftSettings: strict),
        // Model stores, observation, receptionists and job threads. No IO, no libuv.
        .target(
            name: "ReceptionistModel",
            dependencies: ["ReceptionistJSON", "ReceptionistSync", .product(name: "DequeModule", package: "swift-collections")],
            swiftSettings: strict),
        // The only module that imports libuv (and hiredis, whose adapter drives the same loop).
        .target(
            name: "ReceptionistLoop",
            dependencies: [
                "CLibUV", "CHiredis", "CCurl", "ReceptionistSync", "ReceptionistJSON",
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict),
        // The disk engine: stores and topics in one SQLite database, written by a thread of its own.
        .target(
            name: "ReceptionistDisk", dependencies: ["CSQLite", "ReceptionistModel", "ReceptionistJSON", "ReceptionistSync"],
            swiftSettings: strict),
        // The push core: store feeds, topics, subscriptions, histories and the encoder. No IO: it
        // speaks to connections through `PushSink`, and never imports the loop.
        .target(
            name: "ReceptionistPush",
            dependencies: ["ReceptionistModel", "ReceptionistWire", "ReceptionistJSON", "ReceptionistSync"],
            swiftSettings: strict),
        // Wiring, in folders by concern: http, streams, api, trust, operations, engines, cluster, demo.
        .target(
            name: "ReceptionistGateway",
            dependencies: [
                "ReceptionistPush", "ReceptionistWire", "ReceptionistLoop", "ReceptionistModel", "ReceptionistJSON",
                "ReceptionistSync", "ReceptionistDisk", "CBuildStamp",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "receptionist",
            dependencies: [
                "ReceptionistGateway", "ReceptionistJSON", "ReceptionistWire", "ReceptionistDisk",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                // The config file (`--config`), YAML or JSON; read by ConfigFile only.
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: strict
        ),
        // Load generators for `make bench`, on the same loop module.
        .executableTarget(
            name: "receptionist-bench",
            dependencies: [
                "ReceptionistGateway", "ReceptionistLoop", "ReceptionistModel", "ReceptionistSync", "ReceptionistJSON",
                "ReceptionistWire", "ReceptionistDisk",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),

        // libFuzzer targets for the codecs (`make fuzz`, docs/FUZZING.md). A plain build makes
        // them corpus replayers; `-sanitize=fuzzer,address -DFUZZING` makes them fuzzers.
        .systemLibrary(name: "CLibFuzzer", path: "Fuzz/CLibFuzzer"),
        .target(name: "FuzzSupport", dependencies: ["CLibFuzzer"], path: "Fuzz/FuzzSupport", swiftSettings: strict),
        .executableTarget(
            name: "FuzzHTTPRequest", dependencies: ["FuzzSupport", "ReceptionistWire"], path: "Fuzz/FuzzHTTPRequest",
            swiftSettings: strict),
        .executableTarget(
            name: "FuzzWebSocketFrame", dependencies: ["FuzzSupport", "ReceptionistWire"],
            path: "Fuzz/FuzzWebSocketFrame", swiftSettings: strict),
        .executableTarget(
            name: "FuzzClientMessage", dependencies: ["FuzzSupport", "ReceptionistWire", "ReceptionistJSON"],
            path: "Fuzz/FuzzClientMessage", swiftSettings: strict),

        // What the unit tests share: a hand-run execution context, a loop on its own thread, and the
        // heap size of an object.
        .target(
            name: "ReceptionistTestSupport", dependencies: ["ReceptionistModel", "ReceptionistSync", "ReceptionistLoop"],
            path: "Tests/ReceptionistTestSupport", swiftSettings: strict),
        .testTarget(name: "ReceptionistWireTests", dependencies: ["ReceptionistWire", "ReceptionistJSON"], swiftSettings: strict),
        .testTarget(name: "ReceptionistJSONTests", dependencies: ["ReceptionistJSON"], swiftSettings: strict),
        .testTarget(
            name: "ReceptionistModelTests",
            dependencies: ["ReceptionistModel", "ReceptionistJSON", "ReceptionistSync", "ReceptionistTestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "ReceptionistLoopTests", dependencies: ["ReceptionistLoop", "ReceptionistSync", "ReceptionistTestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "ReceptionistPushTests",
            dependencies: [
                "ReceptionistPush", "ReceptionistModel", "ReceptionistWire", "ReceptionistJSON", "ReceptionistSync",
                "ReceptionistTestSupport",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "ReceptionistDiskTests", dependencies: ["ReceptionistDisk", "ReceptionistModel", "ReceptionistJSON", "ReceptionistSync"],
            swiftSettings: strict),
        // The load generators' pure parts: the publish schedule and the pace.
        .testTarget(name: "ReceptionistBenchTests", dependencies: ["receptionist-bench"], swiftSettings: strict),
        .testTarget(
            name: "ReceptionistGatewayTests",
            dependencies: ["ReceptionistGateway", "ReceptionistWire", "ReceptionistLoop", "ReceptionistTestSupport"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
