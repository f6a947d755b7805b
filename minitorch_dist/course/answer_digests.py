"""Digests of the exercises' answers, written by minitorch_dist.answers.write_digests."""

DIGESTS = {
    "lab00.2": {
        "digits": None,
        "names": [],
        "digests": ["a5169ee2b6b0b3e9259b103328ad3af51ab57a840a0682d04971fd87602cba5d"],
    },
    "lab00.3": {
        "digits": None,
        "names": [],
        "digests": ["e626723bddff011f30a426cf94d2a586fb9307caffb6682d3dbe86d8ab450bd5"],
    },
    "lab00.4": {
        "digits": None,
        "names": [],
        "digests": ["41f3c5c244cffdf3c34ee7647d2ca011e4672765ea6610898452672653691300"],
    },
    "lab01.4": {
        "digits": None,
        "names": [],
        "digests": ["2e021eddb84124d894fa65656549d50055c14587fad7ba985a9000cd639e98ef"],
    },
    "lab02.5": {
        "digits": None,
        "names": ["answer_mixed", "answer_fp32"],
        "digests": [
            "cefd337675fa38756ce7700bc7612ab6d93d3e04b6518947c973d6f9943cb7ff",
            "a0ca5839ee8acd89af4d2c443bb09badef3f97a95f1cdcbaa8b9b05a7571d427",
        ],
    },
    "lab05.4": {
        "digits": None,
        "names": ["with_no_sync", "without_no_sync"],
        "digests": [
            "5a37e25d2342d3aff84b45941bb3aede305ec9107a33b76141bca85c55cede6d",
            "55e92f424b04a275e4d25e4393e9e5a05680c78ccdb631cad2fc61000e3da1d3",
        ],
    },
    "lab05.5": {
        "digits": 4,
        "names": ["naive_s", "bucket_s"],
        "digests": [
            "0730af1d988aa7906fec45e9cf8fa3e8dbf42439d50bfe8d54aa60c3cadb0a2b",
            "1d33d6177e132272e49680bbb1277892d38e976a08516e3df846b47328797acb",
        ],
    },
    "lab05.6": {
        "digits": 4,
        "names": ["algbw", "busbw"],
        "digests": [
            "9c64e233dbb75911710f75001e16ac4ed0f3479c99818cdb48973c7794c0551d",
            "51dd2d453e018796d80dd17e717121108393dca1f35729dbc4d4ec4939163de6",
        ],
    },
    "lab06.5": {
        "digits": 12,
        "names": [],
        "digests": ["2b4c6af426e8e0344bab27fe46a45d6682a55ed5fd83fbae0d65121ed3e35c09"],
    },
    "lab06.7": {
        "digits": None,
        "names": ["answer_3_device", "answer_3_cpu"],
        "digests": [
            "0cfab569c3802882ffcf0c190330ff4ed5b9c716e718c7151dea3e5ecae9b5ed",
            "0b9fb7f9d99639953ec6bb42d4f3b27fd875ec7002ba7d77940d1fcf92badd1d",
        ],
    },
    "lab10.8": {
        "digits": 4,
        "names": ["first_4", "second_4", "weight_first_4", "weight_second_4"],
        "digests": [
            "de2e0a70ceac32098d0b6eb4c515224d665d2c81be80e999ff35187bf4badd2f",
            "7c8971d648284485406b7d60e1206dcb01bf63fa974454cbaf4c6bda99033e71",
            "ed29fba8c990b9aba1b3a18d0652a99270a1c017fab5584e127fbe7ecb541876",
            "45b44c76e9d18f64d43a9f810e2d11bee7c1ba1357bca7444a14447b0c751652",
        ],
    },
    "lab12.6": {
        "digits": None,
        "names": [],
        "digests": ["63671982cb3c2563efc45ea83a156d3c9c5911f25403e5a57d7d53944473c497"],
    },
}
