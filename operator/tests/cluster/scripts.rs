//! The control-plane scripts' bad states: each a one-line error naming the cause (and the log file), exit 1,
//! nothing left running.

use std::path::Path;
use std::process::{Command, Output};

use super::plane::{bin_dir, repo_root};

fn script(name: &str) -> Command {
    Command::new(repo_root().join("tests/control-plane").join(name))
}

fn one_line_error(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

#[test]
fn build_without_go_says_so() {
    // A PATH with the shell's tools but no Go.
    let out = script("build")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("build");
    if Path::new("/usr/bin/go").exists() || Path::new("/bin/go").exists() {
        eprintln!("skipped: Go is installed in /usr/bin");
        return;
    }
    let err = one_line_error(&out);
    assert!(err.contains("Go toolchain is not installed"), "{err}");
}

#[test]
fn up_without_binaries_says_to_build() {
    let dir = tempdir("no-binaries");
    let out = script("up")
        .arg(&dir)
        .env("SLUICE_CONTROL_PLANE_BIN", dir.join("nothing-here"))
        .output()
        .expect("up");
    let err = one_line_error(&out);
    assert!(err.contains("run tests/control-plane/build first"), "{err}");
}

#[test]
fn an_api_server_that_never_gets_ready_is_stopped_with_its_etcd() {
    if !bin_dir().join("etcd").exists() {
        eprintln!("skipped: no control plane built");
        return;
    }
    // The real etcd, and a kube-apiserver that starts but never answers.
    let dir = tempdir("never-ready");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    for b in ["etcd", "kube-controller-manager", "kubectl"] {
        std::os::unix::fs::symlink(bin_dir().join(b), bin.join(b)).expect("link");
    }
    std::fs::write(bin.join("kube-apiserver"), "#!/bin/sh\nexec sleep 300\n").expect("stub");
    let mut perms = std::fs::metadata(bin.join("kube-apiserver"))
        .expect("stub")
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(bin.join("kube-apiserver"), perms).expect("chmod");
    let plane = dir.join("plane");
    let out = script("up")
        .arg(&plane)
        .env("SLUICE_CONTROL_PLANE_BIN", &bin)
        .env("SLUICE_CP_READY_TIMEOUT", "3")
        .output()
        .expect("up");
    let err = one_line_error(&out);
    assert!(
        err.contains("kube-apiserver did not become ready in 3 s"),
        "{err}"
    );
    assert!(err.contains("kube-apiserver.log"), "{err}");
    // Nothing left running: neither the stub nor etcd.
    for pidfile in ["etcd.pid", "kube-apiserver.pid"] {
        assert!(!plane.join(pidfile).exists(), "{pidfile} left behind");
    }
    let ps = Command::new("pgrep")
        .args(["-f", &plane.display().to_string()])
        .output()
        .expect("pgrep");
    assert!(
        ps.stdout.is_empty(),
        "left running: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = repo_root()
        .join("target/e2e")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}
