//! A bridge's first tables: its static meters, groups and flows from the
//! configuration, or the tables saved at its last graceful stop
//! ([`crate::saved`]). Built before the bridge runs, so a refused entry
//! stops nothing that runs.

use pipeline::{GroupsConfig, MetersConfig, SwitchState, TablesConfig, Time};

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

/// [`sizes_of`] for a bridge's [`datastore::TablesHead`].
fn head_sizes(head: &datastore::TablesHead) -> (u8, u32, u32) {
    (
        head.n_tables,
        head.flow_table_capacity,
        head.flow_memory_limit_mib,
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
    restore(&br.name, sizes_of(br), path, now, &|| false)
}

/// [`restore_state`] of bridge `bridge` sized `sizes`, giving up between
/// blocks once `stop` says so.
fn restore(
    bridge: &str,
    sizes: (u8, u32, u32),
    path: &std::path::Path,
    now: Time,
    stop: &dyn Fn() -> bool,
) -> Result<(SwitchState, Restored), String> {
    let mut state = empty_state(sizes);
    let mut n = Restored::default();
    let refused = |what: String, error| {
        RuntimeError::Refused {
            bridge: bridge.to_string(),
            what,
            error,
        }
        .to_string()
    };
    datastore::for_each_parsed_block(path, saved::parse_line, |block, parsed| {
        if stop() {
            return Err("not needed".to_string());
        }
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
    let mut state = fill(
        &head.bridge,
        head_sizes(head),
        now,
        head.meters
            .iter()
            .map(|m| (&m.meter_mod, move || format!("{}: {}", m.source, m.text))),
        head.groups
            .iter()
            .map(|g| (&g.group_mod, move || format!("{}: {}", g.source, g.text))),
    )?;
    for f in &head.flows {
        install_flow(&mut state, &head.bridge, now, f.flow_mod(), &|| {
            format!("{}: {}", f.source, f.text)
        })?;
    }
    Ok(state)
}

/// Installs one static flow, `parsed` from the text `what` names (made
/// only for an error).
fn install_flow(
    state: &mut SwitchState,
    bridge: &str,
    now: Time,
    parsed: Result<ofp::FlowMod, flowtext::ParseError>,
    what: &dyn Fn() -> String,
) -> Result<(), RuntimeError> {
    let fm = parsed.map_err(|e| RuntimeError::Unparsable {
        bridge: bridge.to_string(),
        what: what(),
        error: e.message,
    })?;
    state
        .flow_mod(&fm, now)
        .map_err(|error| RuntimeError::Refused {
            bridge: bridge.to_string(),
            what: what(),
            error,
        })?;
    Ok(())
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
        install_flow(state, &br.name, now, parsed, &|| {
            format!("{path}:{line}: {text}")
        })
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

/// Handed-over flows with their lines, as sent to a builder thread.
type Batch = Vec<(usize, ofp::FlowMod)>;

/// Builds bridges' first tables while the configuration is checked
/// ([`datastore::FlowHandover`], `Config::load_handing_over`), each on a
/// thread of its own (`<bridge>-load`) that works while the check reads
/// on:
/// - a bridge without saved tables: from the flows the check hands over
///   (after its meters, groups and inline flows), so that a flows file is
///   read and parsed once at a start;
/// - a bridge with saved tables (`saved_tables`/`BRIDGE.tables`): from
///   that file, kept if at the end of the check its digest is the one of
///   the bridge's static configuration (as `Runtime::start` would
///   decide), given up otherwise.
///
/// [`Prebuild::finish`] gives what
/// [`Runtime::start_with`](crate::Runtime::start_with) takes.
pub struct Prebuild {
    saved_tables: Option<std::path::PathBuf>,
    building: Option<Building>,
    built: Vec<(
        datastore::TablesHead,
        datastore::FlowsFile,
        std::thread::JoinHandle<Outcome>,
    )>,
}

/// The bridge whose flows file the check is reading.
struct Building {
    head: datastore::TablesHead,
    /// Handed-over flows not yet sent (none when restoring).
    batch: Batch,
    /// To the thread building from the handed-over flows.
    tx: Option<std::sync::mpsc::SyncSender<Batch>>,
    /// Restoring saved tables: their file's digest, and the flag that
    /// tells the thread to give up.
    saved: Option<(u64, std::sync::Arc<std::sync::atomic::AtomicBool>)>,
    thread: std::thread::JoinHandle<Outcome>,
}

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
                let outcome = thread
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e));
                (head, file, outcome)
            })
            .collect();
        Prebuilt::of(built)
    }

    /// Stops the build in progress, if any, and discards it.
    fn abandon(&mut self) {
        if let Some(b) = self.building.take() {
            if let Some((_, stop)) = &b.saved {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            drop(b.tx);
            let _ = b.thread.join();
        }
    }

    /// A thread that builds `head`'s tables from the flows sent on the
    /// channel it returns.
    fn from_flows(
        head: &datastore::TablesHead,
        file: &std::path::Path,
    ) -> std::io::Result<(
        std::sync::mpsc::SyncSender<Batch>,
        std::thread::JoinHandle<Outcome>,
    )> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(4);
        let head = head.clone();
        let path = file.display().to_string();
        let thread = std::thread::Builder::new()
            .name(format!("{}-load", head.bridge))
            .spawn(move || {
                let build = || {
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
                };
                Outcome::Built(build())
            })?;
        Ok((tx, thread))
    }

    /// A thread that restores `head`'s bridge's saved tables from
    /// `saved`, giving up when `stop` is set.
    fn from_saved(
        head: &datastore::TablesHead,
        saved: std::path::PathBuf,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> std::io::Result<std::thread::JoinHandle<Outcome>> {
        let bridge = head.bridge.clone();
        let sizes = head_sizes(head);
        std::thread::Builder::new()
            .name(format!("{bridge}-load"))
            .spawn(move || {
                let given_up = || stop.load(std::sync::atomic::Ordering::Relaxed);
                let r = restore(&bridge, sizes, &saved, Time(0), &given_up);
                Outcome::Restored(saved, r)
            })
    }
}

impl datastore::FlowHandover for Prebuild {
    fn start(&mut self, head: &datastore::TablesHead, file: &std::path::Path) -> bool {
        self.abandon();
        let saved = self
            .saved_tables
            .as_deref()
            .map(|d| crate::saved::file_of(d, &head.bridge))
            .filter(|f| f.exists());
        let building = match saved {
            // Restored if the digest is the bridge's at the end (one that
            // cannot be read is left to the start, which sets it aside).
            Some(saved) => {
                let Ok(digest) = crate::saved::digest_of(&saved) else {
                    return false;
                };
                let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                Prebuild::from_saved(head, saved, stop.clone()).map(|thread| Building {
                    head: head.clone(),
                    batch: Vec::new(),
                    tx: None,
                    saved: Some((digest, stop)),
                    thread,
                })
            }
            None => Prebuild::from_flows(head, file).map(|(tx, thread)| Building {
                head: head.clone(),
                batch: Vec::with_capacity(HANDOVER_BATCH),
                tx: Some(tx),
                saved: None,
                thread,
            }),
        };
        // No thread: the bridge is built at the start the usual way.
        match building {
            Ok(b) => {
                self.building = Some(b);
                true
            }
            Err(_) => false,
        }
    }

    fn flow(&mut self, line: usize, fm: ofp::FlowMod) {
        let Some(Building {
            tx: Some(tx),
            batch,
            ..
        }) = &mut self.building
        else {
            return;
        };
        batch.push((line, fm));
        if batch.len() == HANDOVER_BATCH {
            let full = std::mem::replace(batch, Vec::with_capacity(HANDOVER_BATCH));
            // A builder that stopped (refused a flow) takes no more.
            let _ = tx.send(full);
        }
    }

    fn end(&mut self, file: Option<&datastore::FlowsFile>) {
        let Some(file) = file else {
            self.abandon();
            return;
        };
        if let Some(Building {
            head,
            saved: Some((digest, _)),
            ..
        }) = &self.building
        {
            if *digest != crate::saved::head_digest(head, Some(file)) {
                // The start sets the file aside and builds from the
                // configuration.
                self.abandon();
                return;
            }
        }
        let Some(b) = self.building.take() else {
            return;
        };
        if let Some(tx) = b.tx {
            if !b.batch.is_empty() {
                let _ = tx.send(b.batch);
            }
        }
        self.built.push((b.head, file.clone(), b.thread));
    }
}

/// Bridges' first tables built while the configuration was checked
/// ([`crate::Prebuild`]), each with the model it was checked as: what
/// came before its flows file, the file, and the tables or why the
/// pipeline refused them.
pub(crate) type BuiltTables = Vec<(datastore::TablesHead, datastore::FlowsFile, Outcome)>;

/// How a bridge's first tables were built while the configuration was
/// checked.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// From its static configuration (or the pipeline's refusal).
    Built(Result<SwitchState, RuntimeError>),
    /// From its saved tables in this file, with what they held (or why
    /// they were not restored).
    Restored(std::path::PathBuf, Result<(SwitchState, Restored), String>),
}

/// The `BuiltTables` for [`Runtime::start_with`](crate::Runtime::start_with); taken once.
#[derive(Clone, Default)]
pub struct Prebuilt(std::sync::Arc<std::sync::Mutex<BuiltTables>>);

impl std::fmt::Debug for Prebuilt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.lock().len();
        write!(f, "Prebuilt({n} bridge(s))")
    }
}

impl Prebuilt {
    pub(crate) fn of(built: BuiltTables) -> Prebuilt {
        Prebuilt(std::sync::Arc::new(std::sync::Mutex::new(built)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BuiltTables> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops what was not taken.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// `br`'s tables if they were built for it as it is (its sizes,
    /// meters, groups, inline flows and flows file), taken.
    pub(crate) fn take(&self, br: &datastore::Bridge) -> Option<Outcome> {
        let file = br.flows_file.as_ref()?;
        let mut built = self.lock();
        let i = built
            .iter()
            .position(|(head, f, _)| head.bridge == br.name && f == file)?;
        let (head, _, state) = built.swap_remove(i);
        (head == br.tables_head()).then_some(state)
    }
}
