//! The `bi` command against pools another process writes, and against damaged ones.

use bi::core::mem::MemView;
use bi::core::region::Region;
use bi::{Pool, PoolConfig};
use std::process::Command;

fn bi(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bi"))
        .args(args)
        .output()
        .expect("the bi command runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process")]
fn inspect_shows_what_another_process_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.bi");
    // This process writes; the command is another process, which joins nothing.
    let pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
    let sessions = pool.map::<String, String>("sessions").unwrap();
    for i in 0..1000 {
        sessions
            .insert(format!("token-{i}"), "x".repeat(100))
            .unwrap();
    }
    let p = path.to_str().unwrap();
    // The writer's passes (every millisecond) write its figures back; wait for one.
    let json_of = |p: &str| -> serde_json::Value {
        let (code, json, err) = bi(&["inspect", p, "--json"]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&json).unwrap()
    };
    let sessions_of = |v: &serde_json::Value| -> serde_json::Value {
        let all = v["structures"].as_array().unwrap();
        all.iter()
            .find(|s| s["name"] == "sessions")
            .unwrap()
            .clone()
    };
    let mut v = json_of(p);
    for _ in 0..200 {
        if sessions_of(&v)["entries"] == 1000 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        v = json_of(p);
    }
    let s = sessions_of(&v);
    assert_eq!(s["entries"], 1000, "{v}");
    assert!(s["lease_age_ns"].as_u64().is_some(), "{v}");
    let node = &v["nodes"][pool.node()];
    assert!(node["invalidated_lines"].as_u64().unwrap() > 0, "{v}");
    assert!(node["longest_pass_ns"].as_u64().unwrap() >= node["last_pass_ns"].as_u64().unwrap());
    assert!(node["readers"].as_u64().unwrap() >= 1, "{v}");
    assert!(node["ring_fill_percent"].as_u64().unwrap() <= 100, "{v}");
    let (code, text, err) = bi(&["inspect", p]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("\"sessions\""), "{text}");
    assert!(text.contains("1000 entries"), "{text}");
    assert!(
        text.contains(&format!("writer node {}, live", pool.node())),
        "{text}"
    );

    let (code, json, err) = bi(&["inspect", p, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let s = v["structures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "sessions")
        .unwrap();
    assert_eq!(s["writer_node"], pool.node());
    assert_eq!(s["writer_live"], true);
    assert!(s["heap_bytes"].as_u64().unwrap() >= 100_000);
    assert_eq!(v["nodes"][pool.node()]["live"], true);

    let (code, text, _) = bi(&["check", p]);
    assert_eq!(
        (code, text.contains("no problem found")),
        (0, true),
        "{text}"
    );

    // The writer's process ends: its node and role read as gone once the lease lapses.
    drop(sessions);
    drop(pool);
    let (_, json, _) = bi(&["inspect", p, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let s = v["structures"].as_array().unwrap();
    assert!(s.iter().all(|s| s["writer_live"] == false), "{json}");
}

#[test]
#[cfg_attr(miri, ignore = "spawns a process")]
fn check_reports_damage_and_inspect_refuses_what_is_no_region() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.bi");
    {
        let pool = Pool::open_or_create(&path, PoolConfig::default()).unwrap();
        pool.map::<u64, u64>("m").unwrap().insert(1, 1).unwrap();
    }
    let p = path.to_str().unwrap();
    assert_eq!(bi(&["check", p]).0, 0);

    // An extent granted to an owner that names no structure.
    let region = Region::open(&path).unwrap();
    let view = region.hardware();
    let table = region.layout().extent_table();
    let last = table.offset + 8 * (region.layout().extents() - 1);
    view.store(last, &0xdead_beef_u64).unwrap();
    view.writeback(last, 8).unwrap();
    view.fence();
    drop(region);
    let bytes_before = std::fs::read(&path).unwrap();
    let (code, text, _) = bi(&["check", p]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("names no structure"), "{text}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes_before,
        "check changed the region"
    );

    // A header that is not a region's: an error, no report.
    let mut bytes = bytes_before;
    bytes[..64].fill(0x5a);
    std::fs::write(&path, &bytes).unwrap();
    let (code, _, err) = bi(&["inspect", p]);
    assert_eq!(code, 2);
    assert!(err.contains("Corrupt"), "{err}");
    let (code, _, err) = bi(&["check", dir.path().join("missing.bi").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("NotFound"), "{err}");
}
