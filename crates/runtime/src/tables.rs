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

/// Installs `br`'s static flows in order: the inline ones, then those of
/// its flows file, which the model does not keep: the file is read again,
/// parsed a block ahead of the installation on other threads, and must be
/// the file that was checked (its digest, known at its end; the tables
/// are not yet in use, so a changed file is refused whole).
fn install_static_flows(
    state: &mut SwitchState,
    br: &datastore::Bridge,
    now: Time,
) -> Result<(), RuntimeError> {
    let install = |state: &mut SwitchState,
                   what: &dyn Fn() -> String,
                   parsed: Result<ofp::FlowMod, flowtext::ParseError>|
     -> Result<(), RuntimeError> {
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
    for f in &br.flows {
        install(state, &|| format!("{}: {}", f.source, f.text), f.flow_mod())?;
    }
    let Some(file) = &br.flows_file else {
        return Ok(());
    };
    let path = file.path.display();
    file.for_each_flow(|line, text, parsed| {
        install(state, &|| format!("{path}:{line}: {text}"), parsed)
    })
    .map_err(|e| match e {
        datastore::FlowsFileError::Stopped(e) => e,
        e => RuntimeError::FlowsFile {
            bridge: br.name.clone(),
            path: file.path.clone(),
            error: e.to_string(),
        },
    })
}
