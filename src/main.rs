use std::process::ExitCode;

/// Rust starts with SIGPIPE ignored, so a command whose reader has gone (`mailbroker search … |
/// head`) would panic on its next print. Commands end quietly instead, as Unix tools do. The
/// servers keep it ignored: a client that hangs up must not end a server that serves others.
/// Their reports (`serve status`, `mcp status`, `mcp config`) are commands like any other.
fn quiet_on_closed_stdout(cli: &mailbroker::cli::Cli) {
    use mailbroker::cli::Command;
    let serves = match &cli.command {
        Command::Mcp(m) => m.command.is_none(),
        Command::Serve(s) => s.command.is_none(),
        _ => false,
    };
    if !serves {
        // SAFETY: setting a signal's disposition to the default, before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
}

fn main() -> ExitCode {
    let cli = match mailbroker::cli::parse_args(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err((e, json)) => {
            mailbroker::output::print_error(&e, json);
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    quiet_on_closed_stdout(&cli);
    // Logs go to stderr only (stdout carries command output, or MCP frames), redacted. A
    // serve process says what it syncs (a line per sync); a command only what went wrong.
    let serving = matches!(cli.command, mailbroker::cli::Command::Serve(_));
    mailbroker::logging::init(if serving {
        "warn,mailbroker=info"
    } else {
        "warn"
    });
    // A search is a few statements, one after another, on one connection: worker threads
    // would only be started and woken for it (BENCHMARKS.md). Everything else may run work
    // side by side (a sync's accounts and folders, a server's clients).
    let mut builder = if matches!(cli.command, mailbroker::cli::Command::Search { .. }) {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let json = cli.json;
    match runtime.block_on(mailbroker::cli::run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            mailbroker::output::print_error(&e, json);
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
    }
}
