"""The canned answers of the peer: what EQ Reply's built-in engine returns for
bench/reply_fast.lua's message, so both stacks send bodies of the same size."""

REPLY = {
    "replies": [
        {
            "text": "今天被老板骂了……抱抱你。难过的时候不用逞强，我陪着你。",
            "score": 0.923,
            "eq_analysis": "难过和不安的时候，人最需要的是被接住；复述「今天被老板骂了」让对方知道你真的听进去了。",
        },
        {
            "text": "你说今天被老板骂了的时候，我是真的想马上过去陪你。",
            "score": 0.92,
            "eq_analysis": "难过和不安的时候，人最需要的是被接住；复述「今天被老板骂了」让对方知道你真的听进去了。",
        },
        {
            "text": "听到今天被老板骂了，我有点心疼你，这段时间一定很辛苦吧。",
            "score": 0.906,
            "eq_analysis": "难过和不安的时候，人最需要的是被接住；复述「今天被老板骂了」让对方知道你真的听进去了。",
        },
    ],
    "mode": "fast",
    "tokens_used": 226,
}

ANALYSIS = {
    "emotion": "sadness",
    "intensity": 0.829,
    "underlying_need": "希望有人陪伴，情绪能被温柔地接住",
    "relationship_stage": "unknown",
    "suggested_strategy": "先共情：复述对方的感受，认可情绪，不急着讲道理。也可以考虑「安抚」。",
}
