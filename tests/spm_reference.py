"""A copy of chapter 07's plain-Python SentencePiece BPE (the package runs it on short fragments, the `sentencepiece`
library on long ones), kept apart from the package: tests/test_tokenizer.py checks it against llama.cpp on Gemma 3's
real vocabulary."""
import heapq

def spm_merge(text: str, token_id: dict, scores: list) -> list:
    "SentencePiece-BPE symbols of `text` (spaces already escaped): merge the best-scoring adjacent pair first."
    text_of = list(text)
    n = len(text_of)
    nxt, prv = list(range(1, n + 1)), list(range(-1, n - 1))
    if n: nxt[-1] = -1
    heap = []
    def push(left, right):
        if left >= 0 and right >= 0:
            tid = token_id.get(text_of[left] + text_of[right])
            if tid is not None: heapq.heappush(heap, (-scores[tid], left, right, text_of[left], text_of[right]))
    for i in range(n - 1): push(i, i + 1)
    while heap:
        _, left, right, lt, rt = heapq.heappop(heap)
        if text_of[left] != lt or text_of[right] != rt or nxt[left] != right: continue   # stale pair
        text_of[left], text_of[right] = lt + rt, ""
        nxt[left] = nxt[right]
        if nxt[right] >= 0: prv[nxt[right]] = left
        push(prv[left], left); push(left, nxt[left])
    return [t for t in text_of if t]

def spm_ids(symbols: list, token_id: dict, byte_ids: list) -> list:
    "Ids of SentencePiece symbols; a symbol that is not a token becomes its UTF-8 bytes' `<0xXX>` tokens."
    ids = []
    for s in symbols:
        tid = token_id.get(s)
        if tid is not None: ids.append(tid)
        else: ids.extend(byte_ids[b] for b in s.encode("utf-8", "surrogatepass"))
    return ids
