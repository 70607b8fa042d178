//! The scripts' reply codes and messages are the Rust constants that decode them, and each
//! script that publishes switches to SPUBLISH for sharded pub/sub.

use super::scripts::*;

/// A script, the reply codes and messages it must spell as the Rust side does, and whether
/// it publishes.
struct Spec {
    name: &'static str,
    lua: fn(bool) -> String,
    codes: &'static [(&'static str, i64)],
    messages: &'static [(&'static str, &'static str)],
    publishes: bool,
}

const SPECS: &[Spec] = &[
    Spec {
        name: "batch",
        lua: super::batch::script,
        codes: &[
            ("ACQUIRED", ACQUIRED),
            ("BUSY_FOREVER", BUSY_FOREVER),
            ("LOST", LOST),
            ("NOT_HELD", NOT_HELD),
            ("UNLOCKED", UNLOCKED),
            ("HANDED_OVER", HANDED_OVER),
            ("RECORDED", RECORDED),
            ("HELD_FOR_OTHER_WORK", HELD_FOR_OTHER_WORK),
            ("RECORD_WANTED", RECORD_WANTED),
        ],
        messages: &[("UNLOCK_MESSAGE", UNLOCK_MESSAGE)],
        publishes: true,
    },
    Spec {
        name: "fenced",
        lua: super::fenced::script,
        codes: &[
            ("ACQUIRED", ACQUIRED),
            ("BUSY_FOREVER", BUSY_FOREVER),
            ("LOST", LOST),
        ],
        messages: &[],
        publishes: false,
    },
    Spec {
        name: "fair",
        lua: super::fair::script,
        codes: &[
            ("ACQUIRED", ACQUIRED),
            ("BUSY_FOREVER", BUSY_FOREVER),
            ("LOST", LOST),
            ("NOT_HELD", NOT_HELD),
            ("UNLOCKED", UNLOCKED),
        ],
        messages: &[("UNLOCK_MESSAGE", UNLOCK_MESSAGE)],
        publishes: true,
    },
    Spec {
        name: "read_write",
        lua: super::read_write::script,
        codes: &[
            ("ACQUIRED", ACQUIRED),
            ("BUSY_FOREVER", BUSY_FOREVER),
            ("LOST", LOST),
            ("NOT_HELD", NOT_HELD),
            ("UNLOCKED", UNLOCKED),
            ("HELD_BACK", HELD_BACK),
        ],
        messages: &[
            ("READ_RELEASED", UNLOCK_MESSAGE),
            ("WRITE_RELEASED", READ_UNLOCK_MESSAGE),
        ],
        publishes: true,
    },
    Spec {
        name: "semaphore",
        lua: super::semaphore::script,
        codes: &[
            ("ACQUIRED", ACQUIRED),
            ("BUSY_FOREVER", BUSY_FOREVER),
            ("LOST", LOST),
            ("NOT_HELD", NOT_HELD),
            ("UNLOCKED", UNLOCKED),
            ("HANDED_OVER", HANDED_OVER),
        ],
        messages: &[],
        publishes: true,
    },
];

#[test]
fn every_script_spells_its_reply_codes_and_messages_as_the_rust_constants() {
    for spec in SPECS {
        let classic = (spec.lua)(false);
        for (name, value) in spec.codes {
            let found = lua_constant(&classic, name);
            assert_eq!(found, value.to_string(), "{} script: {name}", spec.name);
        }
        for (name, value) in spec.messages {
            let found = lua_constant(&classic, name);
            assert_eq!(found, *value, "{} script: {name}", spec.name);
        }
        if spec.publishes {
            assert_eq!(
                lua_constant(&classic, "PUBLISH"),
                "publish",
                "{}",
                spec.name
            );
            let sharded = (spec.lua)(true);
            assert_eq!(
                lua_constant(&sharded, "PUBLISH"),
                "spublish",
                "{}",
                spec.name
            );
        }
    }
}

/// The value the script's `local NAME, … = value, …` lines give `name`.
fn lua_constant(lua: &str, name: &str) -> String {
    for line in lua.lines() {
        let Some(rest) = line.strip_prefix("local ") else {
            continue;
        };
        let Some((names, values)) = rest.split_once(" = ") else {
            continue;
        };
        let names: Vec<&str> = names.split(", ").collect();
        let values: Vec<&str> = values.split(", ").collect();
        if let Some(at) = names.iter().position(|n| *n == name) {
            return values[at].trim_matches('\'').to_owned();
        }
    }
    panic!("the script does not define {name}");
}
