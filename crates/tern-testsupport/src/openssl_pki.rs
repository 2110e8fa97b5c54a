//! A CA, leaf certificates and OCSP responses made with the `openssl` command
//! line, the way an operator (or a real CA's responder) makes them: the
//! responses come from `openssl ocsp -index ... -rsigner ...`, offline.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tempdir::TempDir;

/// One issued leaf: files for `--cert` / `--key`, and its serial number.
#[derive(Debug, Clone)]
pub struct OpensslLeaf {
    /// PEM chain: leaf, then the CA.
    pub chain: PathBuf,
    /// PEM private key (PKCS#8).
    pub key: PathBuf,
    /// PEM of the leaf alone.
    pub leaf: PathBuf,
    /// Serial number in hex (upper case, as in `index.txt`).
    pub serial_hex: String,
}

/// What an OCSP response says about the leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OcspStatus {
    /// The certificate is good.
    Good,
    /// The certificate was revoked.
    Revoked,
}

/// A throw-away CA (ECDSA P-256) run with the `openssl` binary.
pub struct OpensslCa {
    dir: TempDir,
    ca_pem: PathBuf,
    ca_key: PathBuf,
    next_serial: u32,
}

impl OpensslCa {
    /// Makes the CA in a new temporary directory.
    pub fn new() -> OpensslCa {
        let dir = TempDir::new("openssl-ca");
        let ca_pem = dir.path().join("ca.pem");
        let ca_key = dir.path().join("ca.key");
        openssl(
            dir.path(),
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                path_str(&ca_key),
                "-out",
                path_str(&ca_pem),
                "-subj",
                "/CN=tern OCSP test CA",
                "-days",
                "3650",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
            ],
        );
        OpensslCa {
            dir,
            ca_pem,
            ca_key,
            next_serial: 0x1001,
        }
    }

    /// The CA certificate file (PEM).
    pub fn ca_file(&self) -> &Path {
        &self.ca_pem
    }

    /// The CA certificate in PEM, for rustls clients to trust.
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(&self.ca_pem).expect("read ca.pem")
    }

    /// The directory holding every file of this CA.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Issues a leaf valid for a year for `names` (DNS names or IPs).
    pub fn leaf(&mut self, names: &[&str]) -> OpensslLeaf {
        let serial = self.next_serial;
        self.next_serial += 1;
        let stem = format!("leaf-{serial:X}");
        let at = |ext: &str| self.dir.path().join(format!("{stem}.{ext}"));
        let (key, csr, leaf, chain, ext) =
            (at("key"), at("csr"), at("pem"), at("chain.pem"), at("ext"));
        let san: Vec<String> = names
            .iter()
            .map(|n| match n.parse::<std::net::IpAddr>() {
                Ok(_) => format!("IP:{n}"),
                Err(_) => format!("DNS:{n}"),
            })
            .collect();
        std::fs::write(
            &ext,
            format!(
                "subjectAltName={}\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n",
                san.join(",")
            ),
        )
        .expect("write the extensions file");
        let subject = format!("/CN={}", names.first().copied().unwrap_or("leaf"));
        openssl(
            self.dir.path(),
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                path_str(&key),
                "-out",
                path_str(&csr),
                "-subj",
                &subject,
            ],
        );
        openssl(
            self.dir.path(),
            &[
                "x509",
                "-req",
                "-in",
                path_str(&csr),
                "-CA",
                path_str(&self.ca_pem),
                "-CAkey",
                path_str(&self.ca_key),
                "-set_serial",
                &format!("0x{serial:X}"),
                "-days",
                "365",
                "-extfile",
                path_str(&ext),
                "-out",
                path_str(&leaf),
            ],
        );
        let leaf_pem = std::fs::read_to_string(&leaf).expect("read the leaf");
        std::fs::write(&chain, format!("{leaf_pem}{}", self.ca_pem())).expect("write the chain");
        OpensslLeaf {
            chain,
            key,
            leaf,
            serial_hex: format!("{serial:X}"),
        }
    }

    /// Writes an OCSP response about `leaf` to `name` in the CA directory,
    /// signed by the CA itself. `valid_minutes` (at least 1): nextUpdate
    /// that many minutes after now; `None`: no nextUpdate at all. For a
    /// stale response see [`backdated`].
    pub fn ocsp_response(
        &self,
        leaf: &OpensslLeaf,
        status: OcspStatus,
        valid_minutes: Option<u32>,
        name: &str,
    ) -> PathBuf {
        let index = self.dir.path().join(format!("{name}.index.txt"));
        // index.txt: status, expiry, revocation time, serial, file, subject.
        let line = match status {
            OcspStatus::Good => format!(
                "V\t351231235959Z\t\t{}\tunknown\t/CN=leaf\n",
                leaf.serial_hex
            ),
            OcspStatus::Revoked => format!(
                "R\t351231235959Z\t240101000000Z,keyCompromise\t{}\tunknown\t/CN=leaf\n",
                leaf.serial_hex
            ),
        };
        std::fs::write(&index, line).expect("write index.txt");
        let request = self.dir.path().join(format!("{name}.req.der"));
        openssl(
            self.dir.path(),
            &[
                "ocsp",
                "-issuer",
                path_str(&self.ca_pem),
                "-cert",
                path_str(&leaf.leaf),
                "-no_nonce",
                "-reqout",
                path_str(&request),
            ],
        );
        let out = self.dir.path().join(name);
        let minutes = valid_minutes.map(|m| m.to_string());
        let mut args = vec![
            "ocsp",
            "-index",
            path_str(&index),
            "-rsigner",
            path_str(&self.ca_pem),
            "-rkey",
            path_str(&self.ca_key),
            "-CA",
            path_str(&self.ca_pem),
            "-reqin",
            path_str(&request),
            "-respout",
            path_str(&out),
        ];
        if let Some(m) = &minutes {
            args.extend(["-nmin", m.as_str()]);
        }
        openssl(self.dir.path(), &args);
        out
    }
}

/// A copy of the DER OCSP response `der` with every GeneralizedTime
/// (producedAt, thisUpdate, nextUpdate) moved back to 2000-01-01, so it is
/// long past its nextUpdate: a staple whose refresh job stopped.
///
/// `openssl ocsp` cannot date a response in the past (`-nmin`/`-ndays` must
/// be positive), so the times are rewritten in place; the responder's
/// signature no longer matches, which a server that checks only the dates
/// (as tern does; clients check signatures) cannot tell.
pub fn backdated(der: &[u8]) -> Vec<u8> {
    const PAST: &[u8; 15] = b"20000101000000Z";
    let mut out = der.to_vec();
    let mut i = 0;
    let mut rewritten = 0;
    while i + 17 <= out.len() {
        // GeneralizedTime, 15 bytes: YYYYMMDDHHMMSSZ.
        let value = &out[i + 2..i + 17];
        if out[i] == 0x18
            && out[i + 1] == 0x0f
            && value[14] == b'Z'
            && value[..14].iter().all(u8::is_ascii_digit)
        {
            out[i + 2..i + 17].copy_from_slice(PAST);
            rewritten += 1;
            i += 17;
        } else {
            i += 1;
        }
    }
    assert!(rewritten >= 2, "no OCSP times found to backdate");
    out
}

impl Default for OpensslCa {
    fn default() -> Self {
        OpensslCa::new()
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

/// Runs `openssl args` in `dir`; panics with its output on failure.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("run openssl: {e} (is it installed?)"));
    assert!(
        out.status.success(),
        "openssl {} failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
