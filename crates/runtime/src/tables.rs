//! A bridge's first tables: its static meters, groups and flows from the
//! configuration, or the tables saved at its last graceful stop
//! ([`crate::saved`]). Built before the bridge runs, so a refused entry
//! stops nothing that runs.

use pipeline::{GroupsConfig, MetersConfig, SwitchState, TablesConfig, Time};

use crate::options::Prebuilt;
use crate::saved::{self, Restored, SavedLine};
use crate::RuntimeError;

/// A bridge's empty tables, sized as configured (`n_tables`,
/// `flow_table_capacity`, `flow_memory_limit_mib`).
fn empty_state((n_tables, capacity, memory_mib): (u8, u32, u32)) -> SwitchState {
    SwitchState::new(
        TablesConfig {
            n_tables,
            max_entries: capacity as usize,
            max_bytes: (memory_mib as usize) << 20,
            ..TablesConfig::default()
        },
        GroupsConfig::default(),
        MetersConfig::default(),
    )
}

fn sizes_of(br: &datastore::Bridge) -> (u8, u32, u32) {
    (
        br.n_tables,
        br.flow_table_capacity,
        br.flow_memory_limit_mib,
    )
}

/// A bridge's tables with what was saved at the last stop
/// ([`crate::saved`]) instead of its static meters, groups and flows: the
/// file is read block by block, parsed a block ahead on other threads
/// and installed in its order (meters, groups, flows) as it is read.
/// The error says what was wrong (the tables are not yet in use, so the
/// bridge then starts from its configuration).
pub(crate) fn restore_state(
    br: &datastore::Bridge,
    path: &std::path::Path,
    now: Time,
) -> Result<(SwitchState, Restored), String> {
    let mut state = empty_state(sizes_of(br));
    let mut n = Restored::default();
    let refused = |what: String, error| {
        RuntimeError::Refused {
            bridge: br.name.clone(),
            what,
            error,
        }
        .to_string()
    };
    datastore::for_each_parsed_block(path, saved::parse_line, |block, parsed| {
        for (&(li, _), item) in block.iter().zip(parsed) {
            match item.map_err(|e| format!("line {}: {}", li + 1, e.message))? {
                SavedLine::Digest(_) => {}
                SavedLine::Meter(m) => {
                    state
                        .meter_mod(&m, now)
                        .map_err(|e| refused(format!("saved {}", flowtext::format_meter(&m)), e))?;
                    n.meters += 1;
                }
                SavedLine::Group(g) => {
                    state
                        .group_mod(&g, now)
                        .map_err(|e| refused(format!("saved {}", flowtext::format_group(&g)), e))?;
                    n.groups += 1;
                }
                SavedLine::Flow(f) => {
                    state
                        .flow_mod(&f, now)
                        .map_err(|e| refused(format!("saved {}", flowtext::format_flow(&f)), e))?;
                    n.flows += 1;
                }
            }
        }
        Ok(())
    })
    .map_err(|e| match e {
        datastore::FlowsFileError::Stopped(e) => e,
        e => format!("cannot be read: {e}"),
    })?;
    Ok((state, n))
}

/// A bridge's tables with its static meters, groups and flows.
pub(crate) fn build_state(br: &datastore::Bridge, now: Time) -> Result<SwitchState, RuntimeError> {
    let mut state = head_state(&br.tables_head(), now)?;
    install_file_flows(&mut state, br, now)?;
    Ok(state)
}

/// A bridge's tables with what comes before its flows file's flows: its
/// static meters, groups and inline flows.
fn head_state(head: &datastore::TablesHead, now: Time) -> Result<SwitchState, RuntimeError> {
    let sizes = (
        head.n_tables,
        head.flow_table_capacity,
        head.flow_memory_limit_mib,
    );
    let mut state = fill(
        &head.bridge,
        sizes,
        now,
        head.meters
            .iter()
            .map(|m| (&m.meter_mod, move || format!("{}: {}", m.source, m.text))),
        head.groups
            .iter()
            .map(|g| (&g.group_mod, move || format!("{}: {}", g.source, g.text))),
    )?;
    for f in &head.flows {
        let what = || format!("{}: {}", f.source, f.text);
        let fm = f.flow_mod().map_err(|e| RuntimeError::Unparsable {
            bridge: head.bridge.clone(),
            what: what(),
            error: e.message,
        })?;
        state
            .flow_mod(&fm, now)
            .map_err(|error| RuntimeError::Refused {
                bridge: head.bridge.clone(),
                what: what(),
                error,
            })?;
    }
    Ok(state)
}

/// Empty tables of `sizes` with the meters, then the groups installed;
/// the first one refused is named by its description (made only then).
fn fill<'a>(
    bridge: &str,
    sizes: (u8, u32, u32),
    now: Time,
    meters: impl Iterator<Item = (&'a ofp::MeterMod, impl Fn() -> String)>,
    groups: impl Iterator<Item = (&'a ofp::GroupMod, impl Fn() -> String)>,
) -> Result<SwitchState, RuntimeError> {
    let mut state = empty_state(sizes);
    let refused = |what: &dyn Fn() -> String, error| RuntimeError::Refused {
        bridge: bridge.to_string(),
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

/// Installs the flows of `br`'s flows file in order. The model does not
/// keep them: the file is read again, parsed a block ahead of the
/// installation on other threads, and must be the file that was checked
/// (its digest, known at its end; the tables are not yet in use, so a
/// changed file is refused whole).
fn install_file_flows(
    state: &mut SwitchState,
    br: &datastore::Bridge,
    now: Time,
) -> Result<(), RuntimeError> {
    let Some(file) = &br.flows_file else {
        return Ok(());
    };
    let path = file.path.display();
    file.for_each_flow(|line, text, parsed| {
        let what = || format!("{path}:{line}: {text}");
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

/// Flows sent to a bridge's builder thread at a time.
const HANDOVER_BATCH: usize = 4096;

/// Builds bridges' first tables from the flows a configuration check
/// hands over ([`datastore::FlowHandover`], `Config::load_handing_over`):
/// each bridge's on a thread of its own that installs while the check
/// reads on, so that at a start a flows file is read and parsed once and
/// its check and installation overlap. [`Prebuild::finish`] gives what
/// [`RuntimeOptions::prebuilt`](crate::RuntimeOptions::prebuilt) takes.
pub struct Prebuild {
    /// Where saved tables would be: a bridge that has a saved file starts
    /// from it, so it is not built here.
    saved_tables: Option<std::path::PathBuf>,
    building: Option<Building>,
    built: Vec<Built>,
}

/// The bridge being handed its flows.
struct Building {
    head: datastore::TablesHead,
    batch: Vec<(usize, ofp::FlowMod)>,
    tx: std::sync::mpsc::SyncSender<Vec<(usize, ofp::FlowMod)>>,
    thread: std::thread::JoinHandle<Result<SwitchState, RuntimeError>>,
}

/// A bridge's tables as built from a check, for the model it was
/// checked as.
type Built = (
    datastore::TablesHead,
    datastore::FlowsFile,
    std::thread::JoinHandle<Result<SwitchState, RuntimeError>>,
);

impl Prebuild {
    /// A builder; `saved_tables` as `RuntimeOptions::saved_tables`.
    pub fn new(saved_tables: Option<std::path::PathBuf>) -> Prebuild {
        Prebuild {
            saved_tables,
            building: None,
            built: Vec::new(),
        }
    }

    /// Waits for the builds; their tables, for `Runtime::start`.
    pub fn finish(mut self) -> Prebuilt {
        self.abandon();
        let built = self
            .built
            .into_iter()
            .map(|(head, file, thread)| {
                let state = thread
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e));
                (head, file, state)
            })
            .collect();
        Prebuilt::of(built)
    }

    /// Stops the build in progress, if any, and discards it.
    fn abandon(&mut self) {
        if let Some(b) = self.building.take() {
            drop(b.tx);
            let _ = b.thread.join();
        }
    }
}

impl datastore::FlowHandover for Prebuild {
    fn start(&mut self, head: &datastore::TablesHead, file: &std::path::Path) -> bool {
        self.abandon();
        let saved = self
            .saved_tables
            .as_deref()
            .is_some_and(|d| crate::saved::file_of(d, &head.bridge).exists());
        if saved {
            return false;
        }
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(usize, ofp::FlowMod)>>(4);
        let for_thread = head.clone();
        let path = file.display().to_string();
        let thread = std::thread::Builder::new()
            .name(format!("{}-load", head.bridge))
            .spawn(move || {
                let head = for_thread;
                let now = Time(0);
                let mut state = head_state(&head, now)?;
                for batch in rx.iter() {
                    for (line, fm) in batch {
                        if let Err(error) = state.flow_mod(&fm, now) {
                            // What the check goes on handing over is
                            // dropped as it comes.
                            rx.iter().for_each(drop);
                            return Err(RuntimeError::Refused {
                                bridge: head.bridge.clone(),
                                what: format!("{path}:{line}: {}", flowtext::format_flow(&fm)),
                                error,
                            });
                        }
                    }
                }
                Ok(state)
            });
        match thread {
            Ok(thread) => {
                self.building = Some(Building {
                    head: head.clone(),
                    batch: Vec::with_capacity(HANDOVER_BATCH),
                    tx,
                    thread,
                });
                true
            }
            // No thread: the bridge is built the usual way.
            Err(_) => false,
        }
    }

    fn flow(&mut self, line: usize, fm: ofp::FlowMod) {
        let Some(b) = &mut self.building else {
            return;
        };
        b.batch.push((line, fm));
        if b.batch.len() == HANDOVER_BATCH {
            let batch = std::mem::replace(&mut b.batch, Vec::with_capacity(HANDOVER_BATCH));
            // A builder that stopped (refused a flow) takes no more.
            let _ = b.tx.send(batch);
        }
    }

    fn end(&mut self, file: Option<&datastore::FlowsFile>) {
        let Some(file) = file else {
            self.abandon();
            return;
        };
        let Some(b) = self.building.take() else {
            return;
        };
        if !b.batch.is_empty() {
            let _ = b.tx.send(b.batch);
        }
        drop(b.tx);
        self.built.push((b.head, file.clone(), b.thread));
    }
}
