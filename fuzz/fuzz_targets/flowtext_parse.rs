//! Any text given to the flow, group and meter parsers yields a structure
//! or a positioned error, never a panic; a parsed flow prints to text that
//! parses back to the same flow.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(flow) = flowtext::parse_flow(text) {
        let printed = flowtext::format_flow(&flow);
        assert_eq!(flowtext::parse_flow(&printed).as_ref(), Ok(&flow), "{printed}");
    }
    let _ = flowtext::parse_group(text);
    let _ = flowtext::parse_meter(text);
});
