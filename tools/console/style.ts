/**
 * The console's stylesheet, served as /static/console.css: system fonts, readable at 1280x800 and
 * at phone width (tables scroll sideways in their own box, and a table with actions wraps its
 * reasons so that its actions stay in view at 1280 px), visible focus, and statuses that say
 * their word beside their colour.
 */
export const CONSOLE_CSS = `
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #ffffff; --muted: #57606a; --line: #d0d7de; --link: #0550ae;
  --good: #1a7f37; --bad: #cf222e; --busy: #9a6700; --focus: #0969da; --code: #f6f8fa; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --muted: #8d96a0; --line: #30363d; --link: #4493f8;
  --good: #3fb950; --bad: #f85149; --busy: #d29922; --focus: #4493f8; --code: #161b22; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--link); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 8px; top: 8px; background: var(--bg); padding: 4px 8px; z-index: 1; }
header { display: flex; flex-wrap: wrap; gap: 4px 20px; align-items: baseline; padding: 10px 20px; border-bottom: 1px solid var(--line); }
header .target { color: var(--muted); font-size: 13px; overflow-wrap: anywhere; }
header nav { display: flex; flex-wrap: wrap; gap: 4px 16px; }
header nav a[aria-current] { font-weight: 600; text-decoration: none; border-bottom: 2px solid currentColor; }
main { padding: 12px 20px 40px; max-width: 1400px; }
h1 { font-size: 22px; margin: 8px 0 12px; overflow-wrap: anywhere; } h2 { font-size: 17px; margin: 22px 0 8px; } h3 { font-size: 15px; }
.scroll { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; }
table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; white-space: nowrap; }
/* A reason or an id (ids may have 64 characters) wraps, anywhere if it must, so the actions beside it stay in view. */
td.wrap, th.wrap { white-space: normal; overflow-wrap: anywhere; min-width: 14ch; }
td.wrap.reason { min-width: 28ch; }
tbody tr:last-child > * { border-bottom: 0; }
thead th { font-size: 12px; text-transform: uppercase; letter-spacing: .03em; color: var(--muted); }
tbody th { font-weight: 500; }
code, pre { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--code); border: 1px solid var(--line); border-radius: 6px; padding: 10px; overflow: auto; max-height: 480px; }
.lines .ln { color: var(--muted); user-select: none; }
.diff .add { color: var(--good); } .diff .del { color: var(--bad); } .diff .hunk, .diff .file { color: var(--muted); font-weight: 600; }
.badge { display: inline-block; padding: 0 7px; border-radius: 10px; font-size: 12px; font-weight: 600; border: 1px solid currentColor; }
.badge.good { color: var(--good); } .badge.bad { color: var(--bad); } .badge.busy { color: var(--busy); } .badge.muted { color: var(--muted); }
.fields { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0 0 12px; }
.fields dt { color: var(--muted); } .fields dd { margin: 0; overflow-wrap: anywhere; }
.filters, .paging, .actions { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: end; margin: 0 0 12px; }
.actions p { flex-basis: 100%; margin: 0; }
label { display: flex; flex-direction: column; font-size: 13px; color: var(--muted); gap: 2px; }
input, select, button, .button { font: inherit; padding: 5px 10px; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); }
button, .button { cursor: pointer; text-decoration: none; display: inline-block; }
button.danger { border-color: var(--bad); color: var(--bad); font-weight: 600; }
.paging a[aria-current] { font-weight: 600; }
.confirm { border: 2px solid var(--busy); border-radius: 8px; padding: 4px 16px 16px; max-width: 900px; }
.outcome { border: 2px solid var(--good); border-radius: 8px; padding: 4px 16px 16px; max-width: 900px; }
.outcome.refused { border-color: var(--bad); }
.logline { font: 13px/1.4 ui-monospace, monospace; overflow-wrap: anywhere; }
.logline .level { font-weight: 600; }
.note, .live-note { color: var(--muted); font-size: 13px; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
@media (max-width: 640px) { main, header { padding-left: 10px; padding-right: 10px; } .fields { grid-template-columns: 1fr; } .fields dt { margin-top: 6px; } }
`;
