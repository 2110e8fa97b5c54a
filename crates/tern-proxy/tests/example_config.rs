//! The example configuration shipped in the repository stays valid.

use tern_proxy::config::{load_file, GlobalOptions, Mode, ProxyProtocol, Upstream};
use tern_testsupport::certs::{KeyKind, TestCa};

#[test]
fn examples_tern_toml_is_valid_with_its_certificates_in_place() {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/tern.toml"
    ))
    .unwrap();
    let mut ca = TestCa::new();
    let dir = ca.dir().to_path_buf();
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    let place = |files: tern_testsupport::certs::CertFiles, name: &str, key: &str| {
        std::fs::copy(&files.chain, dir.join("certs").join(name)).unwrap();
        std::fs::copy(&files.key, dir.join("certs").join(key)).unwrap();
    };
    place(
        ca.leaf(&["example.com"], KeyKind::EcdsaP256),
        "example.com.ecdsa.pem",
        "example.com.ecdsa.key",
    );
    place(
        ca.leaf(&["example.com"], KeyKind::Rsa2048),
        "example.com.rsa.pem",
        "example.com.rsa.key",
    );
    place(
        ca.leaf(&["api.example.org"], KeyKind::EcdsaP256),
        "api.example.org.pem",
        "api.example.org.key",
    );
    let path = dir.join("tern.toml");
    std::fs::write(&path, example).unwrap();

    let config = load_file(&path, &GlobalOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.workers, 2);
    assert_eq!(config.listeners.len(), 2);
    let web = &config.listeners[0];
    assert_eq!(web.tls.certs.len(), 3);
    let Upstream::Group(i) = web.upstream else {
        panic!("expected a backend group, got {:?}", web.upstream);
    };
    assert_eq!(config.upstreams[i].servers.len(), 2);
    assert_eq!(
        config.listeners[1].mode,
        Mode::Tcp {
            proxy_protocol: Some(ProxyProtocol::V2)
        }
    );
}

#[test]
fn command_line_overrides_the_files_process_options() {
    let dir = tern_testsupport::tempdir::TempDir::new("override");
    let path = dir.path().join("t.toml");
    std::fs::write(
        &path,
        "workers = 3\n[[listener]]\nlisten = \"127.0.0.1:1\"\n",
    )
    .unwrap();
    let overrides = GlobalOptions {
        workers: Some(1),
        ..GlobalOptions::default()
    };
    assert_eq!(load_file(&path, &overrides).unwrap().workers, 1);
    assert_eq!(
        load_file(&path, &GlobalOptions::default()).unwrap().workers,
        3
    );
}
