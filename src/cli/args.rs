//! The command line as a person types it. Commands that take query words (`search`,
//! `stage-delete`) accept their options before, between and after those words; clap alone
//! would read every word after the first query word as a query word (`--json` searched for
//! as text), because a query word may start with `-` (`-tag:done`).
//!
//! So, before clap sees them, such a command's arguments are sorted: each `--name` (and the
//! value it takes) it knows is an option, anything after `--` is query text, and any other
//! word is a query word. A `--word` the command does not know is refused, never searched for.

use std::ffi::OsString;

use clap::CommandFactory;
use mailbroker_core::Error;

use super::Cli;

/// Parses the process's arguments. An unknown option of a query command is a
/// `validation_error` (with whether `--json` was asked for, to print it as asked); so is any
/// other error clap finds when `--json` was asked for. Without `--json`, clap's errors and
/// `--help` end the process as clap does.
pub fn parse_args(args: Vec<OsString>) -> Result<Cli, (Error, bool)> {
    let json = args.iter().any(|a| a == "--json");
    // One parser for sorting and parsing: making clap's tree of every command's options is
    // most of what parsing costs, and a search is a few milliseconds in all (BENCHMARKS.md).
    let mut command = Cli::command();
    let sorted = sort_query_args(&command, args).map_err(|e| (e, json))?;
    let parsed = command
        .try_get_matches_from_mut(sorted)
        .and_then(|mut matches| {
            <Cli as clap::FromArgMatches>::from_arg_matches_mut(&mut matches)
                .map_err(|e| e.format(&mut command))
        });
    match parsed {
        Ok(cli) => Ok(cli),
        Err(e) if json && e.use_stderr() => Err((usage_error(&e), json)),
        Err(e) => e.exit(),
    }
}

/// Clap's error as ours: its first line, without clap's `error: `.
fn usage_error(e: &clap::Error) -> Error {
    let text = e.to_string();
    let line = text.lines().next().unwrap_or_default();
    Error::validation(line.trim_start_matches("error: ").to_string())
        .with_next_step("nothing was run; see `mailbroker --help`")
}

/// `args` with a query command's options moved ahead of its query words, which follow `--`.
/// Other commands' arguments are returned as they are.
fn sort_query_args(root: &clap::Command, args: Vec<OsString>) -> Result<Vec<OsString>, Error> {
    let Some(at) = subcommand_at(root, &args) else {
        return Ok(args);
    };
    let Some(command) = args[at]
        .to_str()
        .and_then(|name| root.find_subcommand(name))
        .filter(|c| takes_query_words(c))
    else {
        return Ok(args);
    };
    let options = options_of(root, command);
    let mut out: Vec<OsString> = args[..=at].to_vec();
    let mut words = Vec::new();
    let mut rest = args[at + 1..].iter();
    while let Some(arg) = rest.next() {
        let Some(text) = arg.to_str() else {
            words.push(arg.clone());
            continue;
        };
        if text == "--" {
            words.extend(rest.by_ref().cloned());
            break;
        }
        match option_of(&options, text) {
            Some(Opt::Known { takes_value }) => {
                out.push(arg.clone());
                if takes_value && let Some(value) = rest.next() {
                    out.push(value.clone());
                }
            }
            Some(Opt::Unknown(name)) => return Err(unknown_option(command, &options, &name)),
            None => words.push(arg.clone()),
        }
    }
    if !words.is_empty() {
        out.push("--".into());
        out.extend(words);
    }
    Ok(out)
}

/// Where the subcommand's name is: the first word that is not a global option or its value.
fn subcommand_at(root: &clap::Command, args: &[OsString]) -> Option<usize> {
    let options: Vec<&clap::Arg> = root.get_arguments().collect();
    let mut i = 1;
    while i < args.len() {
        let text = args[i].to_str()?;
        match option_of(&options, text) {
            Some(Opt::Known { takes_value }) => i += if takes_value { 2 } else { 1 },
            Some(Opt::Unknown(_)) => return None,
            None => return Some(i),
        }
    }
    None
}

/// Whether a command's positional arguments are query words (which may start with `-`).
fn takes_query_words(command: &clap::Command) -> bool {
    command
        .get_positionals()
        .any(|a| a.get_id() == "query" && a.is_allow_hyphen_values_set())
}

enum Opt {
    /// An option of the command; `takes_value` when its value is the next word (not given
    /// with `=`).
    Known {
        takes_value: bool,
    },
    Unknown(String),
}

/// A subcommand's options: its own, and the root's global ones (which clap copies into every
/// subcommand only when it builds the whole tree, work a search does not otherwise need).
fn options_of<'a>(root: &'a clap::Command, command: &'a clap::Command) -> Vec<&'a clap::Arg> {
    let globals = root.get_arguments().filter(|a| a.is_global_set());
    command.get_arguments().chain(globals).collect()
}

/// What `text` is among `options`: one of them, an option not among them, or neither (a query
/// word: `-tag:done`, `-x`, `-`).
fn option_of(options: &[&clap::Arg], text: &str) -> Option<Opt> {
    if let Some(long) = text.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((name, _)) => (name, true),
            None => (long, false),
        };
        return Some(match options.iter().find(|a| a.get_long() == Some(name)) {
            Some(arg) => Opt::Known {
                takes_value: !inline && arg.get_action().takes_values(),
            },
            None if name == "help" || name == "version" => Opt::Known { takes_value: false },
            None => Opt::Unknown(format!("--{name}")),
        });
    }
    // Short options are only -h (help); any other `-x` is a negated query word.
    (text == "-h").then_some(Opt::Known { takes_value: false })
}

fn unknown_option(command: &clap::Command, options: &[&clap::Arg], name: &str) -> Error {
    let wanted = name.trim_start_matches('-');
    let nearest = options
        .iter()
        .filter_map(|a| a.get_long())
        .chain(["help"])
        .map(|long| (strsim::jaro_winkler(wanted, long), long))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let hint = nearest
        .map(|(_, long)| format!("; did you mean --{long}?"))
        .unwrap_or_default();
    Error::validation(format!("unknown option {name}{hint}")).with_next_step(format!(
        "nothing was run; see `mailbroker {} --help`, and to search for a word that starts \
         with --, put it after --",
        command.get_name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(line: &str) -> Result<Vec<String>, Error> {
        let args = std::iter::once("mailbroker")
            .chain(line.split_whitespace())
            .map(OsString::from)
            .collect();
        Ok(sort_query_args(&Cli::command(), args)?
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect())
    }

    #[test]
    fn with_json_a_usage_error_is_a_validation_error() {
        let args = ["mailbroker", "--json", "update", "from:x", "--read"];
        let Err((e, json)) = parse_args(args.iter().map(OsString::from).collect()) else {
            panic!("a query given as an id was accepted");
        };
        assert!(json);
        assert_eq!(e.error_type(), "validation_error");
        assert!(
            e.message().contains("--query \"from:x\""),
            "{}",
            e.message()
        );
    }

    #[test]
    fn options_anywhere_go_before_the_query_words() {
        assert_eq!(
            sorted("search from:a --json -tag:x --limit 3 b").unwrap(),
            [
                "mailbroker",
                "search",
                "--json",
                "--limit",
                "3",
                "--",
                "from:a",
                "-tag:x",
                "b"
            ]
        );
        assert_eq!(
            sorted("--home /h stage-delete x --permanent --max-messages=5").unwrap(),
            [
                "mailbroker",
                "--home",
                "/h",
                "stage-delete",
                "--permanent",
                "--max-messages=5",
                "--",
                "x"
            ]
        );
        // After `--`, everything is query text.
        assert_eq!(
            sorted("search a -- --json").unwrap(),
            ["mailbroker", "search", "--", "a", "--json"]
        );
        // Other commands are left to clap.
        assert_eq!(
            sorted("update 3 --raed").unwrap(),
            ["mailbroker", "update", "3", "--raed"]
        );
    }

    #[test]
    fn a_misspelt_option_is_refused_with_the_nearest() {
        let e = sorted("stage-delete from:x --permanet").unwrap_err();
        assert_eq!(e.error_type(), "validation_error");
        assert!(
            e.message().contains("--permanet") && e.message().contains("did you mean --permanent?"),
            "{}",
            e.message()
        );
        // The root's global options are the command's too.
        let e = sorted("search x --hme /h").unwrap_err();
        assert!(
            e.message().contains("did you mean --home?"),
            "{}",
            e.message()
        );
        let e = sorted("search x --zzzzzz").unwrap_err();
        assert!(!e.message().contains("did you mean"), "{}", e.message());
    }
}
