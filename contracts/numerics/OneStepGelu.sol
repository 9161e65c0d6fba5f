// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "./Float32.sol";
import {Float64} from "./Float64.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {ReproMath} from "./ReproMath.sol";

/// @title OneStepGelu
/// @notice The one-step verifier of repro mode's GELU: one element of `gelu(x)` and of its
/// input gradient, with the engine's bits (truetrain/training/ops/elementwise.py
/// `gelu_forward` / `gelu_backward`, the C kernels' `tt_gelu_slope`; the reference is
/// truetrain/numerics/special.py). Float64 inside, one rounding to float32 at the end:
/// `gelu(x) = x · (0.5 · (1 + erf64(x · (1/√2))))`; the gradient
/// `g · (cdf + x · (exp64(x · x · -0.5) · (1/√(2π))))`. `erf64` is the engine's table
/// route: `a = |u|`, 1 from 6 up (inf included); else row `i = round(16 a)` of `ERF_TABLE`
/// (erf(i/16) and its degree-7 Taylor coefficients, 97 rows of 8 float64, computed once in
/// decimal arithmetic by the reference), `h = a - i/16` (exact), Horner `p = p · h + c`;
/// NaN stays NaN; `u`'s sign.
library OneStepGelu {
    using Float64 for uint64;
    using OneStepGemm for OneStepGemm.Tensor;

    uint64 internal constant SIX = 0x4018000000000000;
    uint64 internal constant SIXTEEN = 0x4030000000000000;
    uint64 internal constant SIXTEENTH = 0x3FB0000000000000;
    uint64 internal constant NEG_HALF = 0xBFE0000000000000;
    uint64 internal constant INV_SQRT2 = 0x3FE6A09E667F3BCC;
    uint64 internal constant INV_SQRT_2PI = 0x3FD9884533D43651;
    uint256 internal constant DEGREE = 7;

    /// @notice erf(i/16) and its Taylor coefficients 1..7, row i = 0..96, float64 big-endian
    /// (truetrain/numerics/special.py `erf_table`; tests/contracts/test_onestep_gelu.py
    /// checks every word).
    bytes internal constant ERF_TABLE =
        hex"00000000000000003ff20dd750429b6d8000000000000000bfd812746b0379e700000000000000003fbce2f21a042be28000000000000000bf9b82ce31288b51"
        hex"3fb207d480e906583ff1fbd27cdc72d3bfb1fbd27cdc72d3bfd7ca791fd8f7e73fa1efd545de8a863fbc532b7bbe615abf87da7bce15a3fcbf9ac35a97d212df"
        hex"3fc1f5e1a35c3b893ff1c62fa1e869b6bfc1c62fa1e869b6bfd6f552dbcc33363fb196c9cd8dfdf23fbaaba623e123f5bf9734ea69c583cdbf989258e7894528"
        hex"3fcac45e37fe25263ff16e2d7093cd8cbfca254428ddb453bfd59b3da8e1e1763fb988648fe882193fb803427310d199bfa09e7bce5592c9bf9516b205318414"
        hex"3fd1af54e232d6093ff0f5d1602f7e41bfd0f5d1602f7e41bfd3c974458cbdf63fc040e8a6d82e533fb47e5cfee40de4bfa4c0b253ea77ffbf908d946cdc453b"
        hex"3fd5da9f415ff23f3ff05fd3ecbec298bfd477c8e7ee733dbfd1917b60acab733fc322a728d4ed123fb04c50a9cd2c12bfa7ce764eeddd86bf868aac5801171d"
        hex"3fd9dd0d2b721f393fef5f0cdaf15313bfd78749a434fe4ebfce106c51d1ef9d3fc5529abcd006773fa7488b8a7f1ba8bfa9a7945cd872e3bf765c10b8389541"
        hex"3fddb081ce6e2a483fedd167c4cf9d2abfda173acc35a985bfc889a80f4ad9553fc6c2eea0d17b393f9b0645438e5d17bfaa3fd9fcbb6d6d3f2060b78c935b8e"
        hex"3fe0a7ef5c18edd23fec1efca49a5011bfdc1efca49a5011bfc2bf531866e00c3fc76f27de80980e3f7dfeeb5a3e3346bfa99f13b26a76763f7623c617f0f515"
        hex"3fe25b8a88b6dd7f3fea5074e2157620bfdd9a837e5824e4bfb9c41d1d5fae553fc75bebc1b18d1cbf86410ad9332666bfa7df8890b11fa73f84a54816d3608a"
        hex"3fe3f196dcd0f1353fe86e9694134b9ebfde8a3c39181e85bfac8105021682e33fc6963c8a39d692bf9c1242dfffc503bfa52b2668e8627d3f8c7cd9c1ca7367"
        hex"3fe569243d2b3a9b3fe681ff24b4ab04bfdef2bed2786b25bf8a4254557d722f3fc532415c267962bfa558b4c55a835cbfa1b7ad5b777f1b3f91201d3bd0e758"
        hex"3fe6c1c9759d0e5f3fe492e42d78d2c5bfdedc5644353c273f9b6e8591f66e5b3fc349b5eaa14598bfab42a1890ce411bf9b8477966b33813f92e0afb0bb961e"
        hex"3fe7fb9bfaed80783fe2a8dcede3673bbfde5267029187c03fafe0796bb9d05a3fc0fa23021ad0acbfafa21ebca76761bf931546d5c4edb43f937e5469efb7a6"
        hex"3fe91724951b8fc63fe0cab61f084b93bfdd62beb64e84413fb7c9d756a115bb3fbcc60567d78c2bbfb1350f4b222ac7bf853bb4a5af4fbe3f930ac21937fa54"
        hex"3fea1551a16aaeaf3fddfca26f5bbf88bfdc1cd84866038f3fbe4c9975da09873fb747e31bf47af3bfb1d1f00109e42abf647654175ceb423f91a817c594b8cb"
        hex"3feaf767a741088b3fda911f096fbc26bfda911f096fbc263fc1b614b0f528193fb1b614b0f52819bfb1b614b0f528193f72e45a565ad5703f8f096fd702f0ef"
        hex"3febbef0fbde62213fd75a91a7f4d2edbfd8d03ac274201c3fc3954778d6a0df3fa88e0f7b183fc6bfb0f7c15f75ee133f85e22cfa1aab513f89ad28c5557c22"
        hex"3fec6dad2829ec623fd45e99bcbb7915bfd6ea6cf452e8383fc4cb3cf0aa0b9b3f9ca5083167a246bfaf65d15f1cf8d73f8fd1c6c11eda723f83acc78420e9d3"
        hex"3fed0580b2cfd2493fd1a0dc51a9934dbfd4ef05a0f95eeb3fc5648b5dc474173f840fbaba44504cbfac0db89d0a41a43f9388c3ec0569423f7aecb7463cf446"
        hex"3fed8865d98abe013fce4652fadcb6b2bfd2ebf3dcc9f22f3fc571d01c5c56bebf793a9a7bb7ed94bfa8281ce0b34fa43f95d0003af705683f6db43c97264485"
        hex"3fedf85ea8db188e3fc9cb5bd549b111bfd0ed7443f85c333fc5066cda84bba9bf9419fa10b6ed7dbfa3f41761d5a9413f96d1d724baaae43f4e377f5703f7ff"
        hex"3fee5768c3b4a3fc3fc5ce595c455b0abfcdfbbadedf5d2e3fc4374d82e04c67bf9f3b8d52d35665bf9f572c4c8c7b0c3f96b16f52c58b2bbf573ffa9b859606"
        hex"3feea7730ed0bbb93fc24a7b84d38971bfca4b118ef015933fc319c7a75f9187bfa3db5bed47faf6bf97019bda6c2fdd3f959d3aa402c32ebf6b324eab9c87a9"
        hex"3feeea5557137ae03fbe723726b824a9bfc6d5a95d0a1b7f3fc1c2a02beb6ab8bfa6d5a95d0a1b7fbf8e723726b824a93f93ca3d72c47e3bbf736d73a61dbabf"
        hex"3fef21c9f12f06773fb92470a61b6965bfc3a47801c56a573fc0453f90d3bd35bfa8a7c6a239217bbf8075c088031ee33f916f9c9c127b80bf774c2fc9bdfe97"
        hex"3fef4f693b67bd773fb499d478bca735bfc0bcfca21947db3fbd6631e1a28e9ebfa974c03686729dbf617d430bd57df43f8d857f2c4bc9b6bf7954ab0f57a01e"
        hex"3fef74a6d9a383833fb0bf97e95f2a64bfbc435059d097883fba3687c1eaf1adbfa9647a30b168243f66981061dfbb093f87e8755da47040bf79be731fdab95d"
        hex"3fef92d077f8d56d3fab055303221015bfb7a4a8a2bdce133fb7148c3d57c312bfa8a0da543061543f7b22257dd012493f825b378c92a6c0bf78d10fb6b8006f"
        hex"3fefab0dd89d13093fa5a08e85af27e0bfb399812926bc233fb4140efb719cb0bfa7535a61a4193d3f8374c88c7e6abd3f7a40709e010e77bf76dc078888efa7"
        hex"3fefbe61eef4cf6a3fa12ceb37ff9bc3bfb01a1c847fa2073fb143d1c6f4f093bfa5a316520b81ba3f8779b1e57043cc3f70d099c7b29ddebf742fcbaa85e8aa"
        hex"3fefcdacca0bfb733f9b1160991ff737bfaa38d59456f77d3fad5bd91b6b0123bfa3b35dcbc801463f89d76b0a0535c73f614c887a83a0e6bf7117f42cc6e9f4"
        hex"3fefd9ae142795e33f9529b9e8cf9a1ebfa529b9e8cf9a1e3fa8b0ae3a478923bfa1a2c59757ab193f8ace7404c2b2263f3e1935ea65d580bf6bae0ab9d91458"
        hex"3fefe307f2b503d03f906ae13b0d3255bfa0ee3844e59be73fa48b127f8ed8a5bf9f155b4e7d8c3b3f8aa2c0753d569abf4bbf7e2795837bbf65478d784d271c"
        hex"3fefea4218d6594a3f894624e78e0fafbf9ada873606f0aa3fa0ea475da3be7fbf9afe553fa44f403f89973b489fa221bf5dd78ee1541166bf5ea03bb2493671"
        hex"3fefefcce68139743f834d7dbc76d7e5bf951cc18621fc233f9b925a99886bb7bf971e7d408c8c6f3f87ea58080a81efbf646eb9d203e071bf5403333682fa5e"
        hex"3feff404760319b43f7d4143a9dfe965bf9074b60f8df3493f963ef61e824425bf938a98327890e63f85d3b17bbe0f22bf67cae0d45b1a6abf45f8313b6fdd59"
        hex"3feff733814af88c3f75ff2750fe7820bf896f0575a63ae53f91c5a643f04363bf904f5caaf2196f3f8382a146afb9d2bf695cab93aa68d2bf2d2fd90fe62928"
        hex"3feff9960f3eb3273f706918b6355624bf837ccd585f564b3f8c1ec102e364f1bf8ae59615f8eb1a3f811dae47350ddebf6982b274b817883f20283e0b81b24a"
        hex"3feffb5bdf67fe6f3f684ba3004a50d0bf7d9c2ea85a927d3f860898536e104abf85eb1c899f0b703f7d854f73e74c87bf6897719a9d257e3f388cdc8b807c97"
        hex"3feffcaa8f4c9bea3f61d83170fbf6fbbf764e3dcd3af4ba3f8119da0c46ccb1bf81a89b97ceac693f790e81283faacebf66ecdbf67c97f83f41c610bcb9f2f4"
        hex"3feffd9f78c7524a3f5a024365f771bdbf70a9732d5284dd3f7a4bf47a43042abf7c23802d8a5bb73f74f40070668329bf64c9a2c9dccd043f44f7a50b5bc019"
        hex"3feffe514bbdc1973f52ce898809244ebf68af14828bffa73f7407fbd18f1201bf762d4c6d49c7b03f7146c4b3e28c45bf6267f3bc3eb5a43f464f891b0c9bd5"
        hex"3feffed167b12ac23f4afc85e0f82e12bf6221a9f326bef43f6e3c9aab90bcf4bf714b1b98141f213f6c1c19b9e63d70bf5feac3dbeb51243f463e88178b0e49"
        hex"3fefff2cfb0453d93f43360ccd23db3abf5a6a519a114d703f669cf466ccdf62bf6ab0c273ac263e3f66935960664d74bf5b2755bfd735563f452b6263f0c0e7"
        hex"3fefff6dee89352e3f3b23a5a23e4210bf5315107613c6733f60c243329a9ca1bf646301162620843f61e84d1022e8cbbf56b418727163253f436edde582b265"
        hex"3fefff9ba420e8343f330538fbb77ecdbf4b5781e9d7c6473f589e17c074d373bf5ed4ac7daea43e3f5c11f27065ca3fbf52add1ce773e8e3f4151f7854a4982"
        hex"3fefffbb8f1049c63f2a740684026555bf436d34c8f1c26a3f51eb6e14974a25bf5714eb8cc0947f3f55bec08c01b1d7bf4e4621d82dad123f3e1b7b564b0e79"
        hex"3fefffd1ac4135f93f22408e9ba3327fbf3b60d5e974cbbe3f49db74b1d1dcdebf511c85b1e8ff573f50a7b5546b5147bf482f235b05094e3f3998b47c657967"
        hex"3fefffe0e01408573f18fdc1b2dcf7b9bf3322484cf12daa3f427dc1bc6cfef5bf49202f465eb4213f493b4c9746835fbf430e9e6142fe9b3f3555b9d5fb4825"
        hex"3fefffeb3ebb267b3f10f9e1b4dd36dfbf2a8670aa99a5bc3f3a3737e2a2f2bcbf424544f02d2a7e3f42e7e763d3371bbf3da496e53546cf3f3176cf6641d8ca"
        hex"3feffff2436a21dc3f06e2367dc27f95bf223c436c36fdab3f326bf00867a835bf3a51fb50b15f223f3c0825378fda08bf36c3dbfe0cbe4a3f2c1dd1438378df"
        hex"3feffff6f9f67e553efe9b5e8d00ce77bf18de3cd290a7c03f29aa489e3cad21bf32c7d5ef053eb03f3490a4d230eab9bf3145464ea2872b3f2647f721c135eb"
        hex"3feffffa1de8c5823ef44f21e49054f2bf10d188114786593f21b964d438f622bf2a8d7851f26bf03f2ddd6df9b6852dbf29e52b7aac16443f2165b2034fcab2"
        hex"3feffffc316d9ed03eeabe09e9144b5ebf0690585ca91f983f184522fe8815bcbf2298f8d45f650a3f2577577885f858bf2330aab77d471c3f1ac9997dd049bc"
        hex"3feffffd8e1a2f223ee1783ceac28910befe06a8b37e5b933f107978c7b8496bbf19d039884f8be53f1e8d1145e94a54bf1c1f7251172a873f1458b9e0854d68"
        hex"3feffffe710d565e3ed6a597219a93dabef3d0e43d67415e3f062ccea63cb0c5bf11c07721ac7fe53f1586bafc9b9889bf146153fb9898633f0e827fafaa2516"
        hex"3fefffff039f9e8f3ecd21397ead99cbbee9f19734d29cf93efd982bd41d8954bf08320fc4836be53f0e0a1cb1d071f3bf0d384223047b9c3f0696daf6422bd4"
        hex"3fefffff618c3da63ec296a70f414053bee0d88765d3224b3ef394b1fa67116dbf005760ad1bcf9a3f04c1fe48a5aa68bf04b98203383ad13f0085c0f8220827"
        hex"3fefffff9d446ccc3eb789fb715aae95bed5b333cc7f98f13ee9b12fdbf90f62bef5e06923144d703efc6a071925631dbefd178cb0388a823ef7e29d33ac92b6"
        hex"3fefffffc2f171e33ead9371e2ff7c35becbba3ac4cf84723ee0b6a7b0f1b586beed06f586093ea73ef3436bc9fc46f6bef4357b5546e9f33ef110de49c0acd0"
        hex"3fefffffda86faa93ea26f9df8519bd7bec1926290adc8883ed5900c02d97304bee3166de6a8c6403ee9dfcc328729e0beebcab1ed5ec38d3ee81cd74a57ce17"
        hex"3fefffffe92ced933e96ce1aa3fd7bddbeb617a9cedd8ffe3ecb95fa39b39f7fbed8e1fc41538bd93ee137172180139ebee2eb290b1828d43ee0d8c35cb01026"
        hex"3feffffff233ee1d3e8bfd7555a3bd68beab8d7f804d2e733ec17f93e5149289bed013b0457d08fa3ed6b245d7e1d829bed98077548c69503ed7492048ab3ceb"
        hex"3feffffff7b911763e810b1488aeb235bea10b1488aeb2353eb603a5308c50dabec4980e25286cab3ecda5f10dc53b57bed10505376d08013ecfd7c656d671e1"
        hex"3feffffffb1275253e74980cb3c80949be94ea6ce697296f3eab771d9b6f07b8beba26c653fad5b83ec3302bb89379debec67f42e52643333ec58b4adafb958e"
        hex"3feffffffd169d0c3e68b0cfce0579e0be8976564c75a5af3ea0fdac559b6f5ebeb07600ca6e0e9c3eb89ca7745e4767bebd73aa4e4aaf593ebcd9e0d8f2560b"
        hex"3feffffffe4aed5e3e5d5f3a8dea7357be7ebfb14c9170c03e94d9228525f449bea48b536addac5f3eaf48ccf23a68e2beb3183b6134cf043eb31efde2215f01"
        hex"3fefffffff01a8b63e5155a09065d4f7be726afa996c32463e895ea6fdffb3afbe996ba7366c000e3ea3b468019bd292bea8868e1d27f2d63ea916e92305502a"
        hex"3fefffffff6d1e563e444d26de513197be65e32de7af89773e7e9e05b3c8f38abe8f2f6fa7db5b1d3e9899dcace485ebbe9f34b7eef3c9b13ea04be030272d14"
        hex"3fefffffffabd2293e37974e743dea3dbe59cd7dcf23b8323e7252af6f48c16ebe82f7354e6b6be43e8e7102f88aac97be93ab0b0f09fe653e94f6108472d72a"
        hex"3fefffffffd01f893e2b334fac4b9f99be4e2cec6323e50e3e65c027d5bba36abe76df4d024fffbe3e82aaf7c205b9eabe88902edfbfefd63e8ab2ab1b338249"
        hex"3fefffffffe4fa303e1f1e3523b41d7dbe4180fde41550963e599b8665618d99be6b598cb4614deb3e76b1baf456a84ebe7e650e3452e1003e80d678f85bb98f"
        hex"3feffffffff0dd2b3e11a94ff571654fbe34251f33f5578f3e4de6bc1f75bb9bbe6036b5fd1c41583e6b58f1385def96be72a2347efb21353e7508db866ffe00"
        hex"3feffffffff796263e03e44e45301b92be26fffa7fff9fe13e41508f768eb555be530fd0c66a5b013e605563283e1361be66a3a9d4a6da463e6a06fc9ea921eb"
        hex"3feffffffffb5be53df63ac6b4edc88ebe1a0ce0dc06a7063e33e380dd7593a5be4638bc4fb02cba3e535753ad4c5875be5b41f33cafccc93e5fe694e371a659"
        hex"3feffffffffd759d3de8a61745ec7d1dbe0d453ba308d4933e26a8aeba4765aebe39b017abbf15393e46b43c95302c89be5042f2a66410c63e535dc831945a9b"
        hex"3feffffffffe9eb03ddb1e5acf351d87be005042a0a5f3c33e199ac8fd63c66cbe2d72344378e1143e3a6be9a123435bbe433aacb4bf6ce33e474b732e7ceaa7"
        hex"3fefffffffff41883dcd9a880f306bd8bdf20a2ae94181b83e0cb2a2e5641b36be20bc6ecf6645d83e2e7ba5766cb95abe36893476b33c383e3bc2ac3bce3ac4"
        hex"3fefffffffff9a1b3dc0084ff125639dbde3ca42adaa26f63dffe73513c67bf8be12dd9aa5a2bee43e216ef6b93944a8be2a2d58e9b2278b3e306389b9748f25"
        hex"3fefffffffffc9e83db13af4f04f9998bdd589b22c637ffe3df196da0aa69776be0516d3cb76c2a83e13c51d0aaa4419be1e23586e1d02363e232c72906e2a3c"
        hex"3fefffffffffe3803da25f9ee0b923dcbdc74105146a51623de33cde4f35d941bdf760fe7b6663923e063a70fd66d485be11324f6fb6decf3e163a31a36b815c"
        hex"3feffffffffff11a3d9370ab8327af5ebdb8e85bc00ad8b03dd4decacbf8701abde9b3c55800869a3df8c78e44811b28be0373cd6e3f4f4a3e0988ab1c536dd3"
        hex"3feffffffffff8453d846897d4b69fc6bdaa77a4e7dcd7353dc67543695dcc12bddc05c1e2fc71053deb639419fedf8ebdf5cfd7eb9c10253dfd11578959ba45"
        hex"3feffffffffffc053d75422ef5d8949dbd9be6dda2ac430e3db7f8a0f3e23794bdce4cb4aea710d13dde044b3eb1a717bde83ea4ba25a4483df065958aed15d7"
        hex"3feffffffffffdf83d65f8b87a31bd85bd8d2e55024a0fb53da9612cc225df4bbdc03ee5f38b9b493dd04f2f71e2e96bbddab7099f99e01b3de2554b8f609fd1"
        hex"3feffffffffffef83d568823e52970bebd7e46f03befaf7f3d9aa76120eb3034bdb146faeb8906103dc192d3b25dae4fbdcd2eaae6914ef63dd450d4b1246c74"
        hex"3fefffffffffff7b3d46ed2f2515e933bd6f2a6c1669c9023d8bc42ba38a13f8bda2391e135afab83db2c6c24550f64fbdbf9a3c1b0e14793dc6502546ab341a"
        hex"3fefffffffffffbe3d37258610b3b233bd5fd39856f715063d7cb12e2f5ebf8fbd931011e96bfded3da3e4a1f8967022bdb0f6e89cd809103db84a4e0fbb7acc"
        hex"3fefffffffffffdf3d272fd93e036cdcbd501f450d1e61b13d6d68fb81b2ed89bd83c706aa4d25173d94e6479565838ebda20e9eb8375e6d3daa35b9d2fcac80"
        hex"3feffffffffffff03d170beaf9c7ffb6bd40346137a09fcc3d5de74c0dc3aba0bd7459c8175c38af3d85c5ee402a02eebd930e3dc0ff1ab43d9c0877a56439ce"
        hex"3feffffffffffff83d06ba91ac734786bd3028a39099f4d93d4e292863e1795ebd64c4e690fbe2153d767e6e5ac60fd1bd83f00d80a59edb3d8db88ee63eb28b"
        hex"3feffffffffffffc3cf63daf8b4b1e0cbd1ff8ac583bfb313d3e2d06d6fd401abd5505d9535a1b813d670b70116486d4bd74aed68293ee4f3d7f3c5929c895ef"
        hex"3feffffffffffffe3ce5982008db1304bd0f610e8cde57a13d2df2dac2f2d47fbd451b17f95fcc913d576996ddc975d7bd6546155a7f71da3d70456ed89c4f25"
        hex"3fefffffffffffff3cd4cd9c04158cd7bcfe8dfd25ffa6dc3d1d7c149fc9e073bd350429df3842b03d4796a3a04a8924bd55b22817aba1d73d60ce14dc9c5faa"
        hex"3ff00000000000003cc3e296303b2297bced8456ef97c7593d0ccb92e6c24c8dbd24c1aa8cf10b543d37918b6b83c0fbbd45f07365cc71f33d5134d070b5921e"
        hex"3ff00000000000003cb2dc119095729fbcdc4a1a58e02bee3cfbe584a5dd0ee0bd145542efe11f933d275a81c0090eefbd35ff7d49a4b77e3d4177209e5be27d";

    /// @notice Coefficient `k` of row `i` of the table (`t`: the table in memory).
    function coefficient(bytes memory t, uint256 i, uint256 k) internal pure returns (uint64 c) {
        assembly ("memory-safe") {
            c := shr(192, mload(add(add(t, 32), mul(add(mul(i, 8), k), 8))))
        }
    }

    /// @notice The engine's `erf64`.
    function erf64(uint64 u) internal pure returns (uint64) {
        if (u.isNaN()) return Float64.NAN;
        uint64 a = u & ~Float64.SIGN;
        uint64 y = ReproMath.ONE;
        if (a < SIX) {
            uint64 idx = a.mul(SIXTEEN).round(); // exact product, ties to even
            uint256 i = uint256(int256(idx.toInt64()));
            uint64 h = a.sub(idx.mul(SIXTEENTH));
            bytes memory t = ERF_TABLE;
            y = coefficient(t, i, DEGREE);
            for (uint256 k = DEGREE; k > 0; --k) {
                y = y.mul(h).add(coefficient(t, i, k - 1));
            }
        }
        return (y & ~Float64.SIGN) | (u & Float64.SIGN);
    }

    /// @notice float64 `0.5 · (1 + erf64(x · (1/√2)))`.
    function cdf(uint64 x) internal pure returns (uint64) {
        return ReproMath.ONE.add(erf64(x.mul(INV_SQRT2))).mul(ReproMath.HALF);
    }

    /// @notice float32 `gelu(x)`.
    function gelu(uint32 x) internal pure returns (uint32) {
        uint64 x64 = Float32.toFloat64(x);
        return x64.mul(cdf(x64)).toFloat32();
    }

    /// @notice float32 `g · (cdf + x · pdf)` at `x`.
    function geluBackward(uint32 x, uint32 g) internal pure returns (uint32) {
        uint64 x64 = Float32.toFloat64(x);
        uint64 pdf = ReproMath.exp64(x64.mul(x64).mul(NEG_HALF)).mul(INV_SQRT_2PI);
        return Float32.toFloat64(g).mul(cdf(x64).add(x64.mul(pdf))).toFloat32();
    }

    /// @notice `gelu(x)` at `index`, `x` opened.
    function geluElement(OneStepGemm.Tensor calldata x, uint256 index, OneStepGemm.Opening calldata o)
        internal
        pure
        returns (uint32)
    {
        return gelu(x.openAt(index, o));
    }

    /// @notice The input gradient at `index`: `t` = the forward input `x`, the output
    /// gradient `g` (one shape), each opened.
    function geluBackwardElement(OneStepGemm.Tensor[2] calldata t, uint256 index, OneStepGemm.Opening[2] calldata o)
        internal
        pure
        returns (uint32)
    {
        (uint32 x, uint32 g) = OneStepGemm.openPair(t, index, o);
        return geluBackward(x, g);
    }
}
