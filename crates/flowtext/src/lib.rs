//! The ovs-ofctl style flow, group and meter text syntax.
