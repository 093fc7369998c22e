"""The same benchmark on two checkouts of minigluon, interleaved: did a change cost speed?

    python benchmarks/compare_trees.py OLD_TREE NEW_TREE lenet_train.py ROUNDS [ARGS...]

Each round runs `TREE/benchmarks/SCRIPT ARGS` once per tree (PYTHONPATH=TREE, the order
alternating by round, so load drifts hit both alike) and reads the JSON line it prints.
Prints ONE JSON line: for each number in the benchmark's line, the medians over rounds of
old and new and the median of the per-round new/old ratios. Each tree needs its C kernels
built (`pip install -e TREE` or `python setup.py build_ext --inplace` in it)."""
import json, os, statistics, subprocess, sys
if len(sys.argv) < 5 or not sys.argv[4].isdigit():
    sys.exit("usage: compare_trees.py OLD_TREE NEW_TREE SCRIPT ROUNDS [ARGS...] "
             f"(ROUNDS a positive integer), got {sys.argv[1:]}")
old, new, script, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
args = sys.argv[5:]
res = {"old": [], "new": []}
for r in range(rounds):
    order = [("old", old), ("new", new)] if r % 2 == 0 else [("new", new), ("old", old)]
    for name, tree in order:
        env = dict(os.environ, PYTHONPATH=tree)
        out = subprocess.run([sys.executable, os.path.join(tree, "benchmarks", script), *args],
                             cwd=tree, env=env, capture_output=True, text=True, timeout=900)
        line = [l for l in out.stdout.splitlines() if l.startswith("{")]
        if not line:
            print(name, "failed:", out.stderr[-2000:]); sys.exit(1)
        res[name].append(json.loads(line[-1]))
def flat(d, p=""):
    for k, v in d.items():
        if isinstance(v, dict): yield from flat(v, p + k + ".")
        elif isinstance(v, (int, float)) and not isinstance(v, bool): yield p + k, v
summary = {}
for key, _ in flat(res["old"][0]):
    o = [dict(flat(x))[key] for x in res["old"]]; n = [dict(flat(x)).get(key) for x in res["new"]]
    if None in n: continue
    ratios = [b / a for a, b in zip(o, n) if a]
    summary[key] = {"old": statistics.median(o), "new": statistics.median(n),
                    "new_over_old": round(statistics.median(ratios), 3) if ratios else None}
print(json.dumps({"script": script, "rounds": rounds, "args": args, "summary": summary}))
