//! OpenFlow 1.3 error types and codes (spec 1.3.5 §7.4.4), and the error a
//! decoder returns.
//!
//! Every way a message can be malformed maps to exactly one `(type, code)`
//! pair that the switch must answer with; [`DecodeError`] carries that pair
//! so the agent never has to guess.

use serde::Serialize;
use std::fmt;

/// Declares the error types and their codes from one table: for each type
/// its number, its [`OfpError`] variant with the code enum, and its spec
/// name; then its codes, each with its number and spec name (without the
/// `OFPxxC_` prefix). Everything that maps between the two forms is
/// derived from the table.
macro_rules! error_table {
    ($(
        $type_num:literal $type_variant:ident($code:ident) $type_name:literal {
            $($variant:ident = $value:literal $text:literal,)*
        }
    )*) => {
        $(
            #[doc = concat!("The codes of `OFPET_", $type_name, "`.")]
            #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
            #[repr(u16)]
            pub enum $code { $($variant = $value,)* }

            impl $code {
                /// The code for a wire value, if the spec defines one.
                pub fn from_u16(value: u16) -> Option<Self> {
                    match value { $($value => Some(Self::$variant),)* _ => None }
                }
                /// The spec's name without its `OFPxxC_` prefix, e.g. `BAD_LEN`.
                pub fn name(self) -> &'static str {
                    match self { $(Self::$variant => $text,)* }
                }
            }
        )*

        /// An OpenFlow error: the `(type, code)` pair of an `OFPT_ERROR` message.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        pub enum OfpError { $($type_variant($code),)* }

        impl OfpError {
            /// The wire `(type, code)` pair.
            pub fn type_code(self) -> (u16, u16) {
                match self { $(Self::$type_variant(c) => ($type_num, c as u16),)* }
            }

            /// The typed error for a wire pair, if the spec defines it.
            pub fn from_type_code(err_type: u16, code: u16) -> Option<Self> {
                match err_type {
                    $($type_num => $code::from_u16(code).map(Self::$type_variant),)*
                    _ => None,
                }
            }

            /// The spec's name of the code, e.g. `BAD_PREREQ`.
            pub fn code_name(self) -> &'static str {
                match self { $(Self::$type_variant(c) => c.name(),)* }
            }
        }

        /// The spec's name of an error type number.
        pub fn error_type_name(err_type: u16) -> Option<&'static str> {
            match err_type {
                $($type_num => Some($type_name),)*
                OFPET_EXPERIMENTER => Some("EXPERIMENTER"),
                _ => None,
            }
        }
    };
}

error_table! {
    0 HelloFailed(HelloFailedCode) "HELLO_FAILED" {
        Incompatible = 0 "INCOMPATIBLE", Eperm = 1 "EPERM",
    }
    1 BadRequest(BadRequestCode) "BAD_REQUEST" {
        BadVersion = 0 "BAD_VERSION", BadType = 1 "BAD_TYPE", BadMultipart = 2 "BAD_MULTIPART",
        BadExperimenter = 3 "BAD_EXPERIMENTER", BadExpType = 4 "BAD_EXP_TYPE", Eperm = 5 "EPERM",
        BadLen = 6 "BAD_LEN", BufferEmpty = 7 "BUFFER_EMPTY", BufferUnknown = 8 "BUFFER_UNKNOWN",
        BadTableId = 9 "BAD_TABLE_ID", IsSlave = 10 "IS_SLAVE", BadPort = 11 "BAD_PORT",
        BadPacket = 12 "BAD_PACKET", MultipartBufferOverflow = 13 "MULTIPART_BUFFER_OVERFLOW",
    }
    2 BadAction(BadActionCode) "BAD_ACTION" {
        BadType = 0 "BAD_TYPE", BadLen = 1 "BAD_LEN", BadExperimenter = 2 "BAD_EXPERIMENTER",
        BadExpType = 3 "BAD_EXP_TYPE", BadOutPort = 4 "BAD_OUT_PORT",
        BadArgument = 5 "BAD_ARGUMENT", Eperm = 6 "EPERM", TooMany = 7 "TOO_MANY",
        BadQueue = 8 "BAD_QUEUE", BadOutGroup = 9 "BAD_OUT_GROUP",
        MatchInconsistent = 10 "MATCH_INCONSISTENT", UnsupportedOrder = 11 "UNSUPPORTED_ORDER",
        BadTag = 12 "BAD_TAG", BadSetType = 13 "BAD_SET_TYPE", BadSetLen = 14 "BAD_SET_LEN",
        BadSetArgument = 15 "BAD_SET_ARGUMENT",
    }
    3 BadInstruction(BadInstructionCode) "BAD_INSTRUCTION" {
        UnknownInst = 0 "UNKNOWN_INST", UnsupInst = 1 "UNSUP_INST", BadTableId = 2 "BAD_TABLE_ID",
        UnsupMetadata = 3 "UNSUP_METADATA", UnsupMetadataMask = 4 "UNSUP_METADATA_MASK",
        BadExperimenter = 5 "BAD_EXPERIMENTER", BadExpType = 6 "BAD_EXP_TYPE", BadLen = 7 "BAD_LEN",
        Eperm = 8 "EPERM",
    }
    4 BadMatch(BadMatchCode) "BAD_MATCH" {
        BadType = 0 "BAD_TYPE", BadLen = 1 "BAD_LEN", BadTag = 2 "BAD_TAG",
        BadDlAddrMask = 3 "BAD_DL_ADDR_MASK", BadNwAddrMask = 4 "BAD_NW_ADDR_MASK",
        BadWildcards = 5 "BAD_WILDCARDS", BadField = 6 "BAD_FIELD", BadValue = 7 "BAD_VALUE",
        BadMask = 8 "BAD_MASK", BadPrereq = 9 "BAD_PREREQ", DupField = 10 "DUP_FIELD",
        Eperm = 11 "EPERM",
    }
    5 FlowModFailed(FlowModFailedCode) "FLOW_MOD_FAILED" {
        Unknown = 0 "UNKNOWN", TableFull = 1 "TABLE_FULL", BadTableId = 2 "BAD_TABLE_ID",
        Overlap = 3 "OVERLAP", Eperm = 4 "EPERM", BadTimeout = 5 "BAD_TIMEOUT",
        BadCommand = 6 "BAD_COMMAND", BadFlags = 7 "BAD_FLAGS",
    }
    6 GroupModFailed(GroupModFailedCode) "GROUP_MOD_FAILED" {
        GroupExists = 0 "GROUP_EXISTS", InvalidGroup = 1 "INVALID_GROUP",
        WeightUnsupported = 2 "WEIGHT_UNSUPPORTED", OutOfGroups = 3 "OUT_OF_GROUPS",
        OutOfBuckets = 4 "OUT_OF_BUCKETS", ChainingUnsupported = 5 "CHAINING_UNSUPPORTED",
        WatchUnsupported = 6 "WATCH_UNSUPPORTED", Loop = 7 "LOOP", UnknownGroup = 8 "UNKNOWN_GROUP",
        ChainedGroup = 9 "CHAINED_GROUP", BadType = 10 "BAD_TYPE", BadCommand = 11 "BAD_COMMAND",
        BadBucket = 12 "BAD_BUCKET", BadWatch = 13 "BAD_WATCH", Eperm = 14 "EPERM",
    }
    7 PortModFailed(PortModFailedCode) "PORT_MOD_FAILED" {
        BadPort = 0 "BAD_PORT", BadHwAddr = 1 "BAD_HW_ADDR", BadConfig = 2 "BAD_CONFIG",
        BadAdvertise = 3 "BAD_ADVERTISE", Eperm = 4 "EPERM",
    }
    8 TableModFailed(TableModFailedCode) "TABLE_MOD_FAILED" {
        BadTable = 0 "BAD_TABLE", BadConfig = 1 "BAD_CONFIG", Eperm = 2 "EPERM",
    }
    9 QueueOpFailed(QueueOpFailedCode) "QUEUE_OP_FAILED" {
        BadPort = 0 "BAD_PORT", BadQueue = 1 "BAD_QUEUE", Eperm = 2 "EPERM",
    }
    10 SwitchConfigFailed(SwitchConfigFailedCode) "SWITCH_CONFIG_FAILED" {
        BadFlags = 0 "BAD_FLAGS", BadLen = 1 "BAD_LEN", Eperm = 2 "EPERM",
    }
    11 RoleRequestFailed(RoleRequestFailedCode) "ROLE_REQUEST_FAILED" {
        Stale = 0 "STALE", Unsup = 1 "UNSUP", BadRole = 2 "BAD_ROLE",
    }
    12 MeterModFailed(MeterModFailedCode) "METER_MOD_FAILED" {
        Unknown = 0 "UNKNOWN", MeterExists = 1 "METER_EXISTS", InvalidMeter = 2 "INVALID_METER",
        UnknownMeter = 3 "UNKNOWN_METER", BadCommand = 4 "BAD_COMMAND", BadFlags = 5 "BAD_FLAGS",
        BadRate = 6 "BAD_RATE", BadBurst = 7 "BAD_BURST", BadBand = 8 "BAD_BAND",
        BadBandValue = 9 "BAD_BAND_VALUE", OutOfMeters = 10 "OUT_OF_METERS",
        OutOfBands = 11 "OUT_OF_BANDS",
    }
    13 TableFeaturesFailed(TableFeaturesFailedCode) "TABLE_FEATURES_FAILED" {
        BadTable = 0 "BAD_TABLE", BadMetadata = 1 "BAD_METADATA", BadType = 2 "BAD_TYPE",
        BadLen = 3 "BAD_LEN", BadArgument = 4 "BAD_ARGUMENT", Eperm = 5 "EPERM",
    }
}

/// `OFPET_EXPERIMENTER`: the error type of experimenter errors.
pub const OFPET_EXPERIMENTER: u16 = 0xffff;

impl OfpError {
    /// The spec's name of the error type, e.g. `BAD_MATCH`.
    pub fn type_name(self) -> &'static str {
        error_type_name(self.type_code().0).unwrap_or("UNKNOWN")
    }
}

impl fmt::Display for OfpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.type_name(), self.code_name())
    }
}

/// Why a message could not be decoded: the OpenFlow error the switch answers
/// with, where in the message the problem was found, and a readable reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// The error to send back (`OFPT_ERROR` type and code).
    pub error: OfpError,
    /// Byte offset from the start of the message being decoded.
    pub offset: usize,
    /// What was wrong, for logs and CLI output.
    pub reason: String,
}

impl DecodeError {
    pub fn new(error: OfpError, offset: usize, reason: impl Into<String>) -> Self {
        DecodeError {
            error,
            offset,
            reason: reason.into(),
        }
    }

    /// True when this is a length error (truncated or overlong structure),
    /// whatever structure it was found in.
    pub fn is_length_error(&self) -> bool {
        matches!(
            self.error,
            OfpError::BadRequest(BadRequestCode::BadLen)
                | OfpError::BadAction(BadActionCode::BadLen)
                | OfpError::BadInstruction(BadInstructionCode::BadLen)
                | OfpError::BadMatch(BadMatchCode::BadLen)
                | OfpError::TableFeaturesFailed(TableFeaturesFailedCode::BadLen)
        )
    }

    /// Re-labels a length error with the length code of the enclosing
    /// structure (a short action is `BAD_ACTION/BAD_LEN`, not
    /// `BAD_REQUEST/BAD_LEN`). Other errors pass through unchanged.
    pub fn length_error_as(mut self, error: OfpError) -> Self {
        if self.error == OfpError::BadRequest(BadRequestCode::BadLen) {
            self.error = error;
        }
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}: {}", self.error, self.offset, self.reason)
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_code_round_trips_for_every_defined_pair() {
        let mut seen = 0;
        for t in 0..14u16 {
            for c in 0..32u16 {
                if let Some(e) = OfpError::from_type_code(t, c) {
                    assert_eq!(e.type_code(), (t, c));
                    assert!(!e.code_name().is_empty());
                    seen += 1;
                }
            }
        }
        // 2+14+16+9+12+8+15+5+3+3+3+3+12+6 codes in OpenFlow 1.3.5.
        assert_eq!(seen, 111);
        assert_eq!(OfpError::from_type_code(14, 0), None);
        assert_eq!(OfpError::from_type_code(1, 14), None);
    }

    #[test]
    fn display_names_type_and_code() {
        let e = OfpError::BadMatch(BadMatchCode::BadPrereq);
        assert_eq!(e.to_string(), "BAD_MATCH/BAD_PREREQ");
    }
}
