//! Files of flows, groups or meters: one per line, blank lines and lines
//! whose first non-blank character is `#` ignored. An error carries the
//! 1-based line number; its position is the byte offset in that line.

use crate::{parse_flow, parse_group, parse_meter, ParseError};
use ofp::{FlowMod, GroupMod, MeterMod};

fn parse_lines<T>(
    text: &str,
    parse: impl Fn(&str) -> Result<T, ParseError>,
) -> Result<Vec<T>, (usize, ParseError)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        out.push(parse(line).map_err(|e| (i + 1, e))?);
    }
    Ok(out)
}

/// Parses a file of flows (each line as [`parse_flow`]: add unless the
/// line starts with a command word).
pub fn parse_flow_file(text: &str) -> Result<Vec<FlowMod>, (usize, ParseError)> {
    parse_lines(text, parse_flow)
}

/// Parses a file of groups (each line as [`parse_group`]).
pub fn parse_group_file(text: &str) -> Result<Vec<GroupMod>, (usize, ParseError)> {
    parse_lines(text, parse_group)
}

/// Parses a file of meters (each line as [`parse_meter`]).
pub fn parse_meter_file(text: &str) -> Result<Vec<MeterMod>, (usize, ParseError)> {
    parse_lines(text, parse_meter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::FlowModCommand;

    #[test]
    fn flows_comments_and_blank_lines() {
        let text = "# a comment\n\
                    table=0,priority=1,in_port=1,actions=output:2\n\
                    \n   \t\n\
                    \x20 # indented comment\r\n\
                    delete in_port=3\r\n\
                    ip,actions=drop";
        let flows = parse_flow_file(text).unwrap();
        assert_eq!(flows.len(), 3);
        assert_eq!(flows[0].priority, 1);
        assert_eq!(flows[1].command, FlowModCommand::Delete);
        assert_eq!(flows[2].match_.fields.len(), 1);
    }

    #[test]
    fn errors_carry_the_line_and_the_offset_in_it() {
        let text = "in_port=1,actions=drop\n# c\n\n  in_port=1,eth_dts=1,actions=drop\n";
        let (line, e) = parse_flow_file(text).unwrap_err();
        assert_eq!(line, 4);
        assert_eq!((e.token.as_str(), e.position), ("eth_dts", 12));
    }

    #[test]
    fn groups_and_meters() {
        let groups = parse_group_file(
            "group_id=1,type=all,bucket=output:1\n#x\ngroup_id=2,type=indirect,bucket=output:2\n",
        )
        .unwrap();
        assert_eq!(
            groups.iter().map(|g| g.group_id).collect::<Vec<_>>(),
            vec![1, 2]
        );
        let (line, e) = parse_group_file("group_id=1,type=all\ngroup_id=2,type=bad").unwrap_err();
        assert_eq!((line, e.token.as_str(), e.position), (2, "bad", 16));
        let meters = parse_meter_file(
            "meter=1,kbps,bands=type=drop,rate=1\n\nmeter=2,pktps,bands=type=drop,rate=5\n",
        )
        .unwrap();
        assert_eq!(meters.len(), 2);
        let (line, e) = parse_meter_file("\n\nmeter=1,bands=type=drop").unwrap_err();
        assert_eq!((line, e.token.as_str()), (3, "drop"));
        assert!(parse_flow_file("").unwrap().is_empty());
    }
}
