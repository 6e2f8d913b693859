//! OpenMetrics text → Prometheus text format 0.0.4.
//!
//! `prometheus-client` writes only OpenMetrics. The two formats share the
//! sample lines (names, escaped labels, values) and differ in the metadata:
//!
//! | OpenMetrics                       | 0.0.4                               |
//! |-----------------------------------|-------------------------------------|
//! | `# TYPE x counter`, samples `x_total` | `# TYPE x_total counter`        |
//! | `# TYPE x info`, samples `x_info`  | `# TYPE x_info gauge`              |
//! | `# UNIT x unit`                    | (none)                             |
//! | `# EOF` last                       | (none)                             |
//!
//! The HELP line goes with the TYPE line it precedes and is renamed alike.
//! The input is this module's own encoder output: one `# HELP`, one `# TYPE`,
//! at most one `# UNIT` per family, label values escaped (no raw newline).

use std::fmt::Write as _;

/// Rewrites OpenMetrics text into the Prometheus text format 0.0.4.
pub(super) fn from_openmetrics(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut help: Option<(&str, &str)> = None;
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (renamed, ty) = match ty {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "gauge" | "histogram" | "summary" => (name.to_string(), ty),
                _ => (name.to_string(), "untyped"),
            };
            if let Some((help_name, text)) = help.take() {
                if help_name == name {
                    let _ = writeln!(out, "# HELP {renamed} {text}");
                }
            }
            let _ = writeln!(out, "# TYPE {renamed} {ty}");
        } else if line.starts_with('#') {
            // `# UNIT`, `# EOF`: OpenMetrics only.
        } else if !line.is_empty() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::from_openmetrics;

    #[test]
    fn renames_counter_and_info_families_and_drops_unit_and_eof() {
        let om = "# HELP fulmar_worker_busy_seconds Busy time.\n\
                  # TYPE fulmar_worker_busy_seconds counter\n\
                  # UNIT fulmar_worker_busy_seconds seconds\n\
                  fulmar_worker_busy_seconds_total{thread=\"w0\"} 1.5\n\
                  # HELP fulmar_flows Flows.\n\
                  # TYPE fulmar_flows gauge\n\
                  fulmar_flows{bridge=\"br0\"} 3\n\
                  # HELP fulmar_build The build.\n\
                  # TYPE fulmar_build info\n\
                  fulmar_build_info{version=\"0.1.0\"} 1\n\
                  # EOF\n";
        assert_eq!(
            from_openmetrics(om),
            "# HELP fulmar_worker_busy_seconds_total Busy time.\n\
             # TYPE fulmar_worker_busy_seconds_total counter\n\
             fulmar_worker_busy_seconds_total{thread=\"w0\"} 1.5\n\
             # HELP fulmar_flows Flows.\n\
             # TYPE fulmar_flows gauge\n\
             fulmar_flows{bridge=\"br0\"} 3\n\
             # HELP fulmar_build_info The build.\n\
             # TYPE fulmar_build_info gauge\n\
             fulmar_build_info{version=\"0.1.0\"} 1\n"
        );
    }
}
