//! Finds DPDK with `pkg-config libdpdk`, generates the bindings with
//! bindgen and compiles the C shim with the same flags.

#[cfg(feature = "dpdk")]
use std::{env, path::PathBuf, process::Command};

#[cfg(feature = "dpdk")]
fn pkg_config(arg: &str) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args([arg, "libdpdk"])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run pkg-config ({e}): install pkg-config and libdpdk-dev, or build without the `dpdk` feature")
        });
    if !out.status.success() {
        panic!(
            "pkg-config does not find libdpdk: install libdpdk-dev (Debian 12: DPDK 22.11), or build without the `dpdk` feature\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn main() {
    // Without the `dpdk` feature the crate is empty and needs nothing.
    #[cfg(feature = "dpdk")]
    generate();
}

#[cfg(feature = "dpdk")]
fn generate() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-changed=csrc/shim.h");
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let cflags = pkg_config("--cflags");
    // The ring PMD's constructor of ethdevs over rte_rings (in-process
    // port pairs); its library is the PMD EAL also loads, the same file.
    println!("cargo:rustc-link-lib=dylib=rte_net_ring");
    for lib in pkg_config("--libs") {
        if let Some(dir) = lib.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(name) = lib.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={name}");
        }
    }

    // The shim, with DPDK's own flags (they force-include rte_config.h).
    let mut cc = cc::Build::new();
    cc.file("csrc/shim.c")
        .include("csrc")
        .opt_level(3)
        .warnings(true);
    for f in &cflags {
        cc.flag(f);
    }
    cc.compile("fulmar_dpdk_shim");

    // `-include FILE` is two tokens; clang takes them as they are.
    let bindings = bindgen::Builder::default()
        .header("csrc/wrapper.h")
        .clang_arg("-Icsrc")
        .clang_args(cflags.iter().filter(|f| !f.starts_with("-march")))
        .allowlist_function("rte_eal_(init|cleanup|process_type|has_hugepages)")
        .allowlist_function("rte_thread_(register|unregister)")
        .allowlist_function("rte_strerror")
        .allowlist_function("rte_socket_id")
        .allowlist_function("rte_lcore_count")
        .allowlist_function("rte_dev_(probe|remove)")
        .allowlist_function("rte_eth_(dev_configure|dev_info_get|rx_queue_setup|tx_queue_setup|dev_start|dev_stop|dev_close|dev_socket_id|dev_get_port_by_name|dev_get_name_by_port|dev_is_valid_port|stats_get|stats_reset|link_get_nowait|promiscuous_enable|macaddr_get|dev_set_mtu|dev_count_avail|dev_adjust_nb_rx_tx_desc|rx_queue_count|dev_set_link_up)")
        .allowlist_function("rte_pktmbuf_pool_create")
        .allowlist_function("rte_ring_(create|free)")
        .allowlist_function("rte_eth_from_rings")
        .allowlist_var("RING_F_(SP_ENQ|SC_DEQ)")
        .allowlist_function("rte_pktmbuf_free_bulk")
        .allowlist_function("rte_mempool_(free|avail_count|in_use_count)")
        .allowlist_function("fulmar_.*")
        .allowlist_type("rte_mbuf")
        .allowlist_type("rte_eth_(conf|dev_info|stats|link|rxconf|txconf)")
        .allowlist_type("rte_ether_addr")
        .allowlist_type("rte_eth_rx_mq_mode")
        .allowlist_type("rte_proc_type_t")
        .allowlist_var("RTE_PKTMBUF_HEADROOM")
        .allowlist_var("RTE_MBUF_DEFAULT_BUF_SIZE")
        .allowlist_var("RTE_MAX_LCORE")
        .allowlist_var("RTE_MAX_ETHPORTS")
        .allowlist_var("RTE_ETH_LINK_(UP|DOWN)")
        .allowlist_var("RTE_ETH_NAME_MAX_LEN")
        .allowlist_var("RTE_MEMPOOL_CACHE_MAX_SIZE")
        .allowlist_var("SOCKET_ID_ANY")
        .allowlist_var("RTE_MBUF_F_(INDIRECT|EXTERNAL)")
        .derive_default(true)
        .layout_tests(true)
        .generate_comments(false)
        .generate()
        .expect("bindgen over the DPDK headers failed (needs libclang1-14 and libclang-common-14-dev)");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("cannot write the DPDK bindings");
}
