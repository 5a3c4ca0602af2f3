//! `fake-model [--port N]`: runs the fake model server on 127.0.0.1, prints
//! `listening http://127.0.0.1:PORT` and serves until killed.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use chela_testkit::FakeModel;

const USAGE: &str = "usage: fake-model [--port N]";

fn parse_port(mut args: impl Iterator<Item = String>) -> Result<u16, String> {
    let mut port = 0;
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "--port" => args
                .next()
                .ok_or_else(|| format!("--port needs a value\n{USAGE}"))?,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => match other.strip_prefix("--port=") {
                Some(value) => value.to_owned(),
                None => return Err(format!("unknown argument {other:?}\n{USAGE}")),
            },
        };
        port = value
            .parse()
            .map_err(|_| format!("bad port {value:?}\n{USAGE}"))?;
    }
    Ok(port)
}

#[tokio::main]
async fn main() -> ExitCode {
    let port = match parse_port(std::env::args().skip(1)) {
        Ok(port) => port,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let model = match FakeModel::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await {
        Ok(model) => model,
        Err(error) => {
            eprintln!("fake-model: cannot listen on port {port}: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "listening {}", model.base_url())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    drop(stdout);
    match model.serve_forever().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("fake-model: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_port;

    fn args(list: &[&str]) -> impl Iterator<Item = String> {
        list.iter()
            .map(|s| (*s).to_owned())
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn port_defaults_to_zero_and_parses_both_spellings() {
        assert_eq!(parse_port(args(&[])), Ok(0));
        assert_eq!(parse_port(args(&["--port", "8080"])), Ok(8080));
        assert_eq!(parse_port(args(&["--port=9"])), Ok(9));
        assert!(parse_port(args(&["--port"])).is_err());
        assert!(parse_port(args(&["--bogus"])).is_err());
    }
}
