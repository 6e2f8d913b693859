//! Any bytes from an AgentX master must decode to a PDU or to an error,
//! never a panic; a PDU that decodes encodes to bytes that decode to the
//! same PDU.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(pdu) = snmp::pdu::Pdu::decode(data) {
        let again = snmp::pdu::Pdu::decode(&pdu.encode()).expect("an encoded PDU decodes");
        assert_eq!(pdu, again);
    }
});
