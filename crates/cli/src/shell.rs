//! `psp completions SHELL` and `psp man`: the shell completion script and the
//! man page, both generated from the same clap definition the command line
//! parses with, so they cannot drift from the flags. Both write to stdout.

use std::io::{self, Write};

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// `psp completions`.
#[derive(Args, Clone, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for (e.g. `psp completions bash > /etc/bash_completion.d/psp`).
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the completion script for `shell` of the command line `C`.
pub fn completions<C: CommandFactory>(args: CompletionsArgs) -> Result<()> {
    let mut cmd = C::command();
    let name = cmd.get_name().to_string();
    let mut out = io::stdout().lock();
    clap_complete::generate(args.shell, &mut cmd, name, &mut out);
    out.flush().context("writing the completion script")
}

/// Writes the man page of the command line `C` in roff, one page with a
/// section per subcommand (`psp man > psp.1; man ./psp.1`).
pub fn man<C: CommandFactory>() -> Result<()> {
    let cmd = C::command();
    let mut page = Vec::new();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    render_subcommands(&cmd, &mut page)?;
    man.render_version_section(&mut page)?;
    let mut out = io::stdout().lock();
    out.write_all(&page)
        .and_then(|()| out.flush())
        .context("writing the man page")
}

/// One `.SH` section per subcommand with its about text, usage and options,
/// which clap_mangen's own subcommand section (names and one line each) omits.
fn render_subcommands(cmd: &clap::Command, page: &mut Vec<u8>) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let full = sub
            .clone()
            .name(format!("{} {}", cmd.get_name(), sub.get_name()));
        let man = clap_mangen::Man::new(full);
        writeln!(
            page,
            ".SH \"{} {}\"",
            cmd.get_name().to_uppercase(),
            sub.get_name().to_uppercase()
        )?;
        let mut section = Vec::new();
        man.render_synopsis_section(&mut section)?;
        man.render_description_section(&mut section)?;
        man.render_options_section(&mut section)?;
        // Demote the page's own sections to subsections of this one.
        let text = String::from_utf8(section).context("clap_mangen wrote non-UTF-8")?;
        page.extend_from_slice(text.replace(".SH ", ".SS ").as_bytes());
    }
    Ok(())
}
