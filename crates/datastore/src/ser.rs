//! The model written back as a configuration file (`fulmar ctl` shows the
//! running configuration this way; `Config::save` persists it). The text
//! is the file's own shape, [`raw::from_model`](crate::raw::from_model),
//! serialized: every default is written out, dpids as `0x` hex, controller
//! targets in their canonical form; flows given inline stay inline and
//! `*_file`s are referred to by their resolved paths, so loading the text
//! again gives the same model.

use crate::Config;

/// The configuration as TOML text.
pub(crate) fn to_toml(c: &Config) -> String {
    // Every field is a string, integer, boolean, array or table of them:
    // the serializer cannot fail on this shape.
    toml::to_string_pretty(&crate::raw::from_model(c))
        .unwrap_or_else(|e| format!("# cannot write the configuration: {e}\n"))
}
