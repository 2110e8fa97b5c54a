//! Every `tern` command the README shows runs as shown on a fresh clone:
//! each is read from the README's `sh` blocks and run from the repository
//! root with `--check` (parse the flags or the file, load every
//! certificate, validate, exit), which must exit 0. The file paths they
//! name are the example certificates in `examples/certs/`, checked in.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tern_testsupport::tern::tern_bin;
use tern_testsupport::tools::run_command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `tern ...` command lines of the README's `sh` blocks, continuation
/// lines joined, shell prompts and trailing comments removed.
/// `cargo run --release -- ARGS` counts as `tern ARGS`.
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let mut commands = Vec::new();
    // `None` outside a fenced block; `Some(None)` in a block of another
    // language; `Some(Some(lines))` in an `sh` block.
    let mut block: Option<Option<Vec<&str>>> = None;
    for line in readme.lines() {
        if line.starts_with("```") {
            match block.take() {
                Some(Some(lines)) => commands.extend(block_commands(&lines)),
                Some(None) => {}
                None => block = Some((line == "```sh").then(Vec::new)),
            }
            continue;
        }
        if let Some(Some(lines)) = block.as_mut() {
            lines.push(line);
        }
    }
    commands
}

/// The `tern` commands of one `sh` block. A block that shows a session
/// (`$ ` prompts) has its commands on the prompt lines only; the rest is
/// output.
fn block_commands(lines: &[&str]) -> Vec<String> {
    let transcript = lines.iter().any(|l| l.starts_with("$ "));
    let mut commands = Vec::new();
    let mut pending = String::new();
    for line in lines {
        let line = match (transcript, line.strip_prefix("$ ")) {
            (true, None) if pending.is_empty() => continue,
            (_, Some(command)) => command,
            (_, None) => line,
        };
        let code = line.split("  #").next().unwrap_or(line).trim_end();
        let (code, continues) = match code.strip_suffix('\\') {
            Some(head) => (head, true),
            None => (code, false),
        };
        pending.push_str(code.trim());
        pending.push(' ');
        if continues {
            continue;
        }
        let command = std::mem::take(&mut pending);
        let command = command.trim();
        if let Some(args) = command.strip_prefix("cargo run --release -- ") {
            commands.push(format!("tern {args}"));
        } else if command.starts_with("tern ") {
            commands.push(command.to_string());
        }
    }
    commands
}

#[test]
fn every_tern_command_in_the_readme_is_valid_as_shown() {
    let commands = readme_commands();
    assert!(
        commands
            .iter()
            .any(|c| c == "tern serve --config examples/tern.toml --check"),
        "the README's commands were not found: {commands:?}"
    );
    // Continuation lines are joined: the multi-line commands are whole.
    assert!(
        commands.iter().any(|c| c.ends_with(
            "--cert examples/certs/example.com.rsa.pem --key examples/certs/example.com.rsa.key"
        )),
        "{commands:?}"
    );
    eprintln!("{} commands: {commands:#?}", commands.len());
    for command in &commands {
        let args = command.strip_prefix("tern ").expect("a tern command");
        let args = if args.contains("--check") {
            args.to_string()
        } else {
            format!("{args} --check")
        };
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg(format!("exec '{}' {args}", tern_bin().display()))
            .current_dir(repo_root());
        let out = run_command(sh, b"", Duration::from_secs(30));
        assert!(out.success(), "{command}\n{}", out.all());
        assert!(out.stdout.contains(": ok"), "{command}\n{}", out.all());
    }
}

#[test]
fn example_config_loads_every_certificate_it_names() {
    let mut tern = Command::new(tern_bin());
    tern.args(["serve", "--config", "examples/tern.toml", "--check"])
        .current_dir(repo_root());
    let out = run_command(tern, b"", Duration::from_secs(30));
    assert!(out.success(), "{}", out.all());
    assert_eq!(out.stdout.trim(), "examples/tern.toml: ok", "{}", out.all());
    // The check really reads the files: without one it fails, naming it.
    let tmp = std::env::temp_dir().join(format!("tern-readme-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let config = std::fs::read_to_string(repo_root().join("examples/tern.toml")).expect("read");
    std::fs::write(tmp.join("tern.toml"), config).expect("write");
    let mut tern = Command::new(tern_bin());
    tern.args(["serve", "--config", "tern.toml", "--check"])
        .current_dir(&tmp);
    let out = run_command(tern, b"", Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(!out.success(), "{}", out.all());
    assert!(
        out.stderr.contains("example.com.ecdsa.pem"),
        "{}",
        out.all()
    );
}
