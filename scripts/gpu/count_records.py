"""Counts the call records of trace directories (every *.jsonl): call records, the exit
records' "calls", duplicate seqs and ring files left. Usage: count_records.py DIR..."""
import json,sys,glob,collections
for d in sys.argv[1:]:
    recs=[]
    for f in glob.glob(d+'/*.jsonl'):
        for line in open(f):
            try: recs.append(json.loads(line))
            except Exception as e: print("BAD", f, line[:80])
    calls=[r for r in recs if r.get('fn')]
    seqs=collections.Counter(r['seq'] for r in calls)
    dup=sum(1 for v in seqs.values() if v>1)
    ex=[r for r in recs if r.get('event')=='exit']
    print(d, 'calls',len(calls),'exit',[e.get('calls') for e in ex],'dups',dup, 'rings', glob.glob(d+'/*.ring'))
