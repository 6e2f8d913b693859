//! Runs the built `fulmar` binary on files: `fulmar ofp decode`.

use std::process::{Command, Output};

/// A file holding `bytes`, removed when dropped.
fn write_temp(name: &str, bytes: &[u8]) -> tempfile::TempPath {
    let file = tempfile::Builder::new()
        .prefix("fulmar-cli-test-")
        .suffix(&format!("-{name}"))
        .tempfile()
        .unwrap();
    std::fs::write(file.path(), bytes).unwrap();
    file.into_temp_path()
}

fn fulmar(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fulmar"))
        .args(args)
        .output()
        .unwrap()
}

fn good_stream() -> Vec<u8> {
    let mut b = Vec::new();
    // HELLO with a version bitmap offering 1.3.
    b.extend([4, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 0x10]);
    // ECHO_REQUEST "ab".
    b.extend([4, 2, 0, 10, 0, 0, 0, 2, b'a', b'b']);
    // SET_CONFIG.
    b.extend([4, 9, 0, 12, 0, 0, 0, 3, 0, 0, 0, 128]);
    // BARRIER_REQUEST.
    b.extend([4, 20, 0, 8, 0, 0, 0, 4]);
    b
}

#[test]
fn decodes_a_good_file_with_roundtrip() {
    let path = write_temp("good.bin", &good_stream());
    let out = fulmar(&["ofp", "decode", "--roundtrip", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["HELLO", "ECHO_REQUEST", "SET_CONFIG", "BARRIER_REQUEST"]
    );
    let offsets: Vec<u64> = lines
        .iter()
        .map(|l| l["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, [0, 16, 26, 38]);
    assert_eq!(lines[2]["xid"], 3);
    assert_eq!(lines[2]["msg"]["miss_send_len"], 128);
    assert_eq!(lines[1]["msg"]["data"], "6162");
    assert_eq!(lines[0]["file"], path.to_str().unwrap());
}

#[test]
fn corrupted_file_fails_naming_file_and_offset() {
    let mut bytes = good_stream();
    bytes[27] = 99; // SET_CONFIG (at 26) becomes an unknown message type.
    let path = write_temp("bad-type.bin", &bytes);
    let out = fulmar(&["ofp", "decode", "--roundtrip", path.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad-type.bin"), "{stderr}");
    assert!(stderr.contains("offset 27"), "{stderr}");
    assert!(stderr.contains("BAD_TYPE"), "{stderr}");
    // The rest still decoded and was printed.
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
}

#[test]
fn truncated_file_and_roundtrip_difference_fail() {
    let bytes = good_stream();
    let path = write_temp("short.bin", &bytes[..bytes.len() - 3]);
    let out = fulmar(&["ofp", "decode", path.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("short.bin: offset 38"), "{stderr}");

    // Non-zero padding in TABLE_MOD decodes but does not re-encode the same.
    let table_mod = [4, 17, 0, 16, 0, 0, 0, 1, 0, 0, 7, 0, 0, 0, 0, 0];
    let path = write_temp("padding.bin", &table_mod);
    assert!(fulmar(&["ofp", "decode", path.to_str().unwrap()])
        .status
        .success());
    let out = fulmar(&["ofp", "decode", "--roundtrip", path.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("padding.bin: offset 10"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

#[test]
fn missing_file_is_an_error() {
    let out = fulmar(&["ofp", "decode", "/nonexistent/fulmar-test-file"]);
    assert!(!out.status.success());
}

#[test]
fn several_files_report_each_and_fail_if_any_fails() {
    let good = write_temp("multi-good.bin", &good_stream());
    let bad = write_temp("multi-bad.bin", &[4, 2, 0, 9, 0, 0, 0, 1]);
    let out = fulmar(&[
        "ofp",
        "decode",
        "--roundtrip",
        good.to_str().unwrap(),
        bad.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("multi-bad.bin: offset 0"), "{stderr}");
    assert!(!stderr.contains("multi-good.bin"), "{stderr}");
}
