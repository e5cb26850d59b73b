"""bench/hog/launch_probe.py with known answers: a stand-in allot-execute
(a shell script printing what the real one prints) and a local /metrics
server whose histograms change between the probe's two scrapes."""

import http.server
import json
import pathlib
import subprocess
import sys
import threading

PROBE = pathlib.Path(__file__).resolve().parents[2] / "bench" / "hog" / "launch_probe.py"

BEFORE = """# TYPE allot_agent_loop_section_seconds histogram
allot_agent_loop_section_seconds_bucket{section="launcher start",le="0.001"} 10
allot_agent_loop_section_seconds_bucket{section="launcher start",le="0.005"} 10
allot_agent_loop_section_seconds_bucket{section="launcher start",le="0.0075"} 10
allot_agent_loop_section_seconds_bucket{section="launcher start",le="+Inf"} 10
allot_agent_loop_section_seconds_sum{section="launcher start"} 0.005
allot_agent_loop_section_seconds_count{section="launcher start"} 10
allot_agent_loop_section_longest_seconds{section="launcher start"} 0.0009
allot_agent_loop_section_seconds_bucket{section="launch",le="0.001"} 1
allot_agent_loop_section_seconds_bucket{section="launch",le="0.005"} 1
allot_agent_loop_section_seconds_bucket{section="launch",le="0.0075"} 1
allot_agent_loop_section_seconds_bucket{section="launch",le="+Inf"} 2
allot_agent_loop_section_seconds_sum{section="launch"} 0.021
allot_agent_loop_section_seconds_count{section="launch"} 2
allot_agent_loop_section_longest_seconds{section="launch"} 0.02
allot_agent_launch_seconds_bucket{le="0.005"} 1
allot_agent_launch_seconds_bucket{le="+Inf"} 1
allot_agent_launch_seconds_sum 0.002
allot_agent_launch_seconds_count 1
"""

# 100 more starts: 97 under 1 ms, 1 in (1, 5], 2 in (5, 7.5], one of them
# the longest so far (6.5 ms); "reaped" ran only during the phase, 4 times;
# "launch" 5 times under 1 ms, its longest (20 ms) from before the phase.
AFTER = """# TYPE allot_agent_loop_section_seconds histogram
allot_agent_loop_section_seconds_bucket{section="launcher start",le="0.001"} 107
allot_agent_loop_section_seconds_bucket{section="launcher start",le="0.005"} 108
allot_agent_loop_section_seconds_bucket{section="launcher start",le="0.0075"} 110
allot_agent_loop_section_seconds_bucket{section="launcher start",le="+Inf"} 110
allot_agent_loop_section_seconds_sum{section="launcher start"} 0.105
allot_agent_loop_section_seconds_count{section="launcher start"} 110
allot_agent_loop_section_longest_seconds{section="launcher start"} 0.0065
allot_agent_loop_section_seconds_bucket{section="reaped",le="0.001"} 4
allot_agent_loop_section_seconds_bucket{section="reaped",le="0.005"} 4
allot_agent_loop_section_seconds_bucket{section="reaped",le="0.0075"} 4
allot_agent_loop_section_seconds_bucket{section="reaped",le="+Inf"} 4
allot_agent_loop_section_seconds_sum{section="reaped"} 0.002
allot_agent_loop_section_seconds_count{section="reaped"} 4
allot_agent_loop_section_longest_seconds{section="reaped"} 0.0009
allot_agent_loop_section_seconds_bucket{section="launch",le="0.001"} 6
allot_agent_loop_section_seconds_bucket{section="launch",le="0.005"} 6
allot_agent_loop_section_seconds_bucket{section="launch",le="0.0075"} 6
allot_agent_loop_section_seconds_bucket{section="launch",le="+Inf"} 7
allot_agent_loop_section_seconds_sum{section="launch"} 0.023
allot_agent_loop_section_seconds_count{section="launch"} 7
allot_agent_loop_section_longest_seconds{section="launch"} 0.02
allot_agent_launch_seconds_bucket{le="0.005"} 3
allot_agent_launch_seconds_bucket{le="+Inf"} 4
allot_agent_launch_seconds_sum 0.1
allot_agent_launch_seconds_count 4
"""


def _metrics_server(pages):
    served = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = pages[min(len(served), len(pages) - 1)].encode()
            served.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, served


def _fake_execute(tmp_path, body):
    script = tmp_path / "fake-execute"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def _probe(tmp_path, execute, port, *extra):
    out = subprocess.run([sys.executable, str(PROBE), "--execute", execute, "--master", "127.0.0.1:1",
                          "--metrics-port", str(port), *extra],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_probe_counts_launches_and_reads_the_phase_from_two_scrapes(tmp_path):
    server, served = _metrics_server([BEFORE, AFTER])
    execute = _fake_execute(tmp_path, 'echo "task t launching on h"; sleep 0.05; echo "task t RUNNING"; '
                                      'echo "task t FINISHED"\n')
    try:
        probe = _probe(tmp_path, execute, server.server_address[1], "--interval-ms", "100",
                       "--duration", "5", "--max-launches", "3")
    finally:
        server.shutdown()
    assert served == ["/metrics", "/metrics"], "one scrape before and one after"
    assert probe["launches"] == 3 and probe["running"] == 3 and probe["failed"] == 0
    assert probe["framework_launch"]["n"] == 3
    assert probe["framework_launch"]["p50_ms"] >= 50, "from 'launching' to 'RUNNING'"
    start = probe["sections"]["launcher start"]
    assert start["runs"] == 100
    assert start["over_5ms"] == 2
    assert start["p50_le_ms"] == 1 and start["p99_le_ms"] == 7.5
    assert start["max_ms"] == 6.5, "the agent's longest rose during the phase: it is the phase's"
    reaped = probe["sections"]["reaped"]
    assert reaped["runs"] == 4 and reaped["over_5ms"] == 0
    assert reaped["max_ms"] == 0.9, "its first runs: the agent's longest is the phase's"
    launch = probe["sections"]["launch"]
    assert launch["runs"] == 5 and launch["p99_le_ms"] == 1
    assert launch["max_in_ms"] == [0, 1], "not a new longest: the bucket of the phase's longest"
    assert probe["agent_launch"]["runs"] == 3 and probe["agent_launch"]["p99_le_ms"] == float("inf")
    lines = subprocess.run([sys.executable, str(PROBE), "--summarize", "/dev/stdin"], input=json.dumps(probe),
                           capture_output=True, text=True, check=True).stdout
    assert "launcher start" in lines and "> 5 ms: 2" in lines and "max 6.5 ms" in lines


def test_probe_reports_launches_that_never_ran(tmp_path):
    server, _ = _metrics_server([BEFORE, BEFORE])
    execute = _fake_execute(tmp_path, 'echo "allot-execute: no offer fitting cpus:0.1 within 1 s"; exit 124\n')
    try:
        probe = _probe(tmp_path, execute, server.server_address[1], "--interval-ms", "50",
                       "--duration", "1", "--max-launches", "2")
    finally:
        server.shutdown()
    assert probe["launches"] == 2 and probe["running"] == 0 and probe["failed"] == 2
    assert "no offer fitting" in probe["failures"][0]
    assert probe["framework_launch"] is None
    assert probe["sections"] == {}, "nothing ran on the agent's loop between the scrapes"


def test_probe_refuses_a_bad_interval():
    out = subprocess.run([sys.executable, str(PROBE), "--execute", "x", "--master", "m", "--metrics-port", "1",
                          "--interval-ms", "0"], capture_output=True, text=True)
    assert out.returncode == 2 and "must be positive" in out.stderr
