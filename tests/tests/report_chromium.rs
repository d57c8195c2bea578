//! The bundled example's HTML report renders in headless Chromium: every chart is in the rendered DOM and the
//! screenshot is a real picture. Skips (saying so) where Chromium is not installed; `.ci/chart-check` installs
//! Debian's `chromium` so that CI runs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice_operator::engine::EngineConfig;
use sluice_operator::sim::{self, Simulation};

const CHROMIUM: &str = "/usr/bin/chromium";

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bundled_report(dir: &Path) -> PathBuf {
    let docs = sim::bundled_example().expect("the bundled example parses");
    let mut simulation =
        Simulation::from_documents(&docs, EngineConfig::default()).expect("the example loads");
    let report = simulation.run(None, |_, _| {}).expect("the example runs");
    let nodes = sim::report::node_uses(&simulation, &report);
    let html = sim::report::render_html(&report, &nodes, "Sluice simulation report")
        .expect("the report renders");
    let path = dir.join("report.html");
    std::fs::write(&path, html).expect("the report is written");
    path
}

/// Runs Chromium headless with `args` on `page`, killing it after a minute; returns its stdout.
fn chromium(profile: &Path, args: &[&str], page: &Path) -> String {
    // Stdout goes to a file: the DOM is bigger than a pipe's buffer, and nothing reads the pipe while waiting.
    let stdout_path = profile.with_extension("out");
    let stdout = std::fs::File::create(&stdout_path).expect("chromium's stdout file");
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("chromium can be waited on") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("chromium took over a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "chromium failed: {status:?}");
    std::fs::read_to_string(&stdout_path).expect("chromium's stdout")
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.len() < 24 || &png[..8] != b"\x89PNG\r\n\x1a\n" || &png[12..16] != b"IHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&png[16..20]), be(&png[20..24])))
}

#[test]
fn report_renders_in_headless_chromium() {
    if !Path::new(CHROMIUM).exists() {
        println!(
            "SKIPPED: {CHROMIUM} is not installed (apt-get install chromium; .ci/chart-check does)"
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("sluice-report-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let _scratch = Scratch(dir.clone());
    let page = bundled_report(&dir);

    let dom = chromium(&dir.join("profile-dom"), &["--dump-dom"], &page);
    for id in ["utilisation", "waits", "fairness", "timeline", "heatmap"] {
        let at = dom
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("section {id} is not in the rendered DOM"));
        let section = &dom[at..];
        let end = section.find("</section>").unwrap_or(section.len());
        if id != "heatmap" {
            assert!(
                section[..end].contains("<svg"),
                "section {id} has no SVG chart in the rendered DOM"
            );
            assert!(section[..end].contains("<path") || section[..end].contains("<rect"));
        }
    }
    // The bundled example places gangs on nodes (topology-aware flavors), so the heat map has cells.
    assert!(!dom.contains("No per-node placement in this run."));

    let shot = dir.join("report.png");
    let arg = format!("--screenshot={}", shot.display());
    chromium(
        &dir.join("profile-shot"),
        &[&arg, "--window-size=1040,2260"],
        &page,
    );
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert_eq!(png_size(&png), Some((1040, 2260)));
    // A blank page of this size compresses to a few kilobytes; drawn charts and text do not.
    assert!(png.len() > 60_000, "screenshot is only {} bytes", png.len());
}
