//! A bridge's first tables: its static meters, groups and flows from the
//! configuration, or the tables saved at its last graceful stop
//! ([`crate::saved`]). Built before the bridge runs, so a refused entry
//! stops nothing that runs.

use pipeline::{GroupsConfig, MetersConfig, SwitchState, TablesConfig, Time};

use crate::saved::SavedTables;
use crate::RuntimeError;

/// A bridge's empty tables, sized as configured.
fn empty_state(br: &datastore::Bridge) -> SwitchState {
    SwitchState::new(
        TablesConfig {
            n_tables: br.n_tables,
            max_entries: br.flow_table_capacity as usize,
            max_bytes: (br.flow_memory_limit_mib as usize) << 20,
            ..TablesConfig::default()
        },
        GroupsConfig::default(),
        MetersConfig::default(),
    )
}

/// A bridge's tables with what was saved at the last stop
/// ([`crate::saved`]) instead of its static meters, groups and flows.
pub(crate) fn restore_state(
    br: &datastore::Bridge,
    saved: &SavedTables,
    now: Time,
) -> Result<SwitchState, RuntimeError> {
    let mut state = fill(
        br,
        now,
        saved
            .meters
            .iter()
            .map(|m| (m, move || format!("saved {}", flowtext::format_meter(m)))),
        saved
            .groups
            .iter()
            .map(|g| (g, move || format!("saved {}", flowtext::format_group(g)))),
    )?;
    for f in &saved.flows {
        state
            .flow_mod(f, now)
            .map_err(|error| RuntimeError::Refused {
                bridge: br.name.clone(),
                what: format!("saved {}", flowtext::format_flow(f)),
                error,
            })?;
    }
    Ok(state)
}

/// A bridge's tables with its static meters, groups and flows.
pub(crate) fn build_state(br: &datastore::Bridge, now: Time) -> Result<SwitchState, RuntimeError> {
    let mut state = fill(
        br,
        now,
        br.meters
            .iter()
            .map(|m| (&m.meter_mod, move || format!("{}: {}", m.source, m.text))),
        br.groups
            .iter()
            .map(|g| (&g.group_mod, move || format!("{}: {}", g.source, g.text))),
    )?;
    install_static_flows(&mut state, br, now)?;
    Ok(state)
}

/// Empty tables sized for `br` with the meters, then the groups
/// installed; the first one refused is named by its description (made
/// only then).
fn fill<'a>(
    br: &datastore::Bridge,
    now: Time,
    meters: impl Iterator<Item = (&'a ofp::MeterMod, impl Fn() -> String)>,
    groups: impl Iterator<Item = (&'a ofp::GroupMod, impl Fn() -> String)>,
) -> Result<SwitchState, RuntimeError> {
    let mut state = empty_state(br);
    let refused = |what: &dyn Fn() -> String, error| RuntimeError::Refused {
        bridge: br.name.clone(),
        what: what(),
        error,
    };
    for (m, what) in meters {
        state.meter_mod(m, now).map_err(|e| refused(&what, e))?;
    }
    for (g, what) in groups {
        state.group_mod(g, now).map_err(|e| refused(&what, e))?;
    }
    Ok(state)
}

/// Static flows parsed per block, a block ahead of their installation.
const FLOW_BLOCK: usize = 8192;

/// Installs `br`'s static flows in order. The model keeps only their text,
/// so each is parsed again: on a second thread, a few blocks ahead of the
/// installation, when there are more than a block of them (a million
/// flows take about 2 s to parse and 3 s to install on one core here).
fn install_static_flows(
    state: &mut SwitchState,
    br: &datastore::Bridge,
    now: Time,
) -> Result<(), RuntimeError> {
    let install = |state: &mut SwitchState,
                   f: &datastore::StaticFlow,
                   parsed: Result<ofp::FlowMod, flowtext::ParseError>|
     -> Result<(), RuntimeError> {
        let what = || format!("{}: {}", f.source, f.text);
        let fm = parsed.map_err(|e| RuntimeError::Unparsable {
            bridge: br.name.clone(),
            what: what(),
            error: e.message,
        })?;
        state
            .flow_mod(&fm, now)
            .map_err(|error| RuntimeError::Refused {
                bridge: br.name.clone(),
                what: what(),
                error,
            })?;
        Ok(())
    };
    if br.flows.len() <= FLOW_BLOCK {
        for f in &br.flows {
            install(state, f, f.flow_mod())?;
        }
        return Ok(());
    }
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel(4);
        s.spawn(move || {
            for block in br.flows.chunks(FLOW_BLOCK) {
                let parsed: Vec<_> = block.iter().map(|f| f.flow_mod()).collect();
                // The installing side stopped at a refused flow.
                if tx.send(parsed).is_err() {
                    return;
                }
            }
        });
        let mut flows = br.flows.iter();
        for parsed in rx {
            for (r, f) in parsed.into_iter().zip(flows.by_ref()) {
                install(state, f, r)?;
            }
        }
        Ok(())
    })
}
