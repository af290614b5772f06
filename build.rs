//! Names the commit the binary is built from, for `crewlet --version`
//! (docs/upgrading.md): two sidecars of one version number built from
//! different commits are told apart. Outside a git checkout (a source
//! tarball, a container build without `.git`) the commit is `unknown`.

fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=CREWLET_COMMIT={commit}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo:rerun-if-env-changed=CREWLET_COMMIT");
}
